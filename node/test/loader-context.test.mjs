// What a loader says of its own result through its context: ctx.setTtl,
// ctx.setTags (tags that depend on the loaded value) and ctx.skip, in a
// cache with its segment and in a degraded one.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { opener } from './agents.mjs'

const cache = opener()

test('ctx.setTags: the value lives under the tags the loader chose, in every process', async () => {
  const c = cache('ctx-tags')
  const row = { id: 7, authorId: 3, title: 'Hello' }
  const v = await c.getOrSet('post:7', (ctx) => {
    ctx.setTags([`author:${row.authorId}`])
    return row
  }, { tags: ['posts'] })
  assert.deepEqual(v, row)
  assert.deepEqual(c.get('post:7'), row)
  c.invalidateTags('posts') // the call's tags were replaced
  assert.deepEqual(c.get('post:7'), row)
  c.invalidateTags('author:3')
  assert.equal(c.get('post:7'), undefined)
})

test('ctx.setTtl: the value lives as long as the loader said', async () => {
  const c = cache('ctx-ttl')
  await c.getOrSet('short', (ctx) => {
    ctx.setTtl(0.2)
    return 'brief'
  }, { ttl: 600 })
  assert.equal(c.get('short'), 'brief')
  await new Promise((r) => setTimeout(r, 300))
  assert.equal(c.get('short'), undefined)
})

test('ctx.skip: the value is returned, not stored; the next call loads again', async () => {
  const c = cache('ctx-skip')
  let loads = 0
  const loader = (ctx) => {
    loads++
    ctx.skip()
    return { partial: true }
  }
  assert.deepEqual(await c.getOrSet('k', loader), { partial: true })
  assert.equal(c.get('k'), undefined)
  await c.getOrSet('k', loader)
  assert.equal(loads, 2)
})

test('a cached miss takes the tags the loader chose', async () => {
  const c = cache('ctx-neg', { negTtl: 60 })
  let loads = 0
  const loader = (ctx) => {
    loads++
    ctx.setTags('user:9')
    return null
  }
  assert.equal(await c.getOrSet('user:9', loader), undefined)
  assert.equal(await c.getOrSet('user:9', loader), undefined)
  assert.equal(loads, 1)
  c.invalidateTags('user:9')
  await c.getOrSet('user:9', loader)
  assert.equal(loads, 2)
})

test('bad arguments to the context throw in the loader, naming the method', async () => {
  const c = cache('ctx-bad')
  await assert.rejects(c.getOrSet('a', (ctx) => ctx.setTtl(-1)), { name: 'RangeError', message: /^ctx\.setTtl\(\): / })
  await assert.rejects(c.getOrSet('b', (ctx) => ctx.setTags(['ok', ''])), { name: 'RangeError', message: /ctx\.setTags\(\): a tag must not be empty/ })
  await assert.rejects(c.getOrSet('c', (ctx) => ctx.setTags(Array(9).fill('t'))), /ctx\.setTags\(\)/)
  assert.equal(c.get('a'), undefined)
})

test('a degraded cache follows the loader context too', async () => {
  const c = cache('ctx-degraded', { directory: '/nonexistent/ziggurat', degraded: 'local', onWarning: () => {} })
  assert.equal(c.degraded, true)
  await c.getOrSet('k', (ctx) => {
    ctx.skip()
    return 1
  })
  assert.equal(c.get('k'), undefined)
  await c.getOrSet('k2', (ctx) => {
    ctx.setTags('x')
    return 2
  })
  assert.equal(c.get('k2'), 2)
})
