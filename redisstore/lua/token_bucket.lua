-- Store.Allow with the token bucket. KEYS[1]: the key's hash (tk: balance,
-- rf: refill time). ARGV: now (epoch ms), capacity, refill amount (both
-- millitokens), refill period (ms), tokens requested. A missing key is a
-- full bucket. Returns {allowed, whole tokens remaining, retry-after in ms
-- ("0" when allowed, "never" when the bucket cannot refill)}.
local now, cap, amt, per, n = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local v = redis.call('HMGET', KEYS[1], 'tk', 'rf')
local tk, rf = v[1], v[2]
if not tk or not rf then tk, rf = cap, now end
local ok, ntk, nrf, avail, retry = try_consume(tk, rf, now, cap, amt, per, n)
if not ok then
  return {0, avail, retry or 'never'}
end
redis.call('HSET', KEYS[1], 'tk', ntk, 'rf', nrf)
-- The key may go once the bucket is full again: a missing key is full.
local full = retry_after_exact(bsub(parse(cap), parse(ntk)), amt, per) or '0'
local life = badd(parse(full), parse('1000'))
if bcmp(life, parse('3153600000000')) > 0 then life = parse('3153600000000') end
redis.call('PEXPIRE', KEYS[1], tostr(life))
return {1, sat64((bdivmod(parse(ntk), B1000))), '0'}
