'use strict'
// Next.js 16's `cacheHandlers.default` module (withZiggurat sets it): the handler object.
module.exports = require('./next.cjs').createUseCacheHandler()
