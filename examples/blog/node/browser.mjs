// The Node.js blog in a real browser: Chromium (the system's, /usr/bin/chromium,
// never downloaded) driven by puppeteer-core. A comment posted through the post
// page's form is on that page at every reload, whichever worker answers; the
// worker is read from X-Served-By in the responses the browser got.
//
//   node examples/blog/node/browser.mjs http://127.0.0.1:8000 [/usr/bin/chromium]
//
// Prints one JSON line: { workers, statuses, comment }; exits 1 when a reload
// misses the comment.
import puppeteer from 'puppeteer-core'

const [base, executablePath = '/usr/bin/chromium'] = process.argv.slice(2)
const browser = await puppeteer.launch({
  executablePath,
  headless: true,
  // CI runs as root, where Chromium's sandbox cannot start.
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
})
try {
  const page = await browser.newPage()
  await page.goto(`${base}/`)
  const postPath = await page.$eval('article h2 a', (a) => a.pathname)
  // The post page warmed into the shared cache, so that the comment has something to purge.
  for (let i = 0; i < 3; i++) await page.goto(base + postPath)
  const before = await page.$eval('#comments h3', (h) => h.textContent)
  const text = `Seen from every worker ${Math.random().toString(36).slice(2, 10)}`
  await page.type('input[name=author]', 'Browser')
  await page.type('textarea[name=body]', text)
  await Promise.all([page.waitForNavigation(), page.click('#comments form button')])
  const workers = new Set()
  const statuses = []
  for (let i = 0; i < 24; i++) {
    // A reload asks every cache on the way to revalidate; going to the page again, as by a
    // link, lets the shared cache answer: both must show the comment. The browser keeps
    // its connection to one worker: a new window (its own connections) every other time
    // reaches the others.
    let view = page
    let res
    if (i % 2) {
      const context = await browser.createBrowserContext()
      view = await context.newPage()
      res = await view.goto(base + postPath)
    } else {
      res = await page.reload()
    }
    const comments = await view.$eval('#comments', (s) => s.textContent)
    if (view !== page) await view.browserContext().close()
    if (!comments.includes(text)) {
      console.log(JSON.stringify({ error: `reload ${i} misses the comment`, served: res.headers()['x-served-by'] }))
      process.exitCode = 1
      break
    }
    workers.add(res.headers()['x-served-by'])
    statuses.push(res.headers()['cache-status'] ?? '')
    if (workers.size >= 3 && i >= 8) break
  }
  console.log(JSON.stringify({ before, workers: [...workers], statuses, comment: text }))
} finally {
  await browser.close()
}
