'use strict'
// Next.js's `cacheHandler` module (withZiggurat sets it): the class Next.js makes.
module.exports = require('./next.cjs').ZigguratCacheHandler
