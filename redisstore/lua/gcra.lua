-- Store.Allow with GCRA. KEYS[1]: the key, holding one integer, the
-- theoretical arrival time (TAT). Time is counted in ticks of 1/amount
-- ms, so that the emission interval (period / amount ms per token) is a
-- whole number of ticks: interval = period (ms), now = now_ms * amount.
-- ARGV: now (epoch ms), capacity and refill amount (tokens), refill period
-- (ms), tokens requested. The tolerance is capacity * interval. As in the
-- throttle GCRA scripts: limit = max(tat, now) + (n - 1) * interval -
-- tolerance; denied when now < limit, retry = limit - now; else the new
-- TAT is max(tat, now) + n * interval. Returns {allowed, whole tokens
-- remaining, retry-after in ms ("0" when allowed)}.
local parse, tostr, bcmp, badd, bsub, bneg, bmul, bdivmod, bsign, sat64 = bigs()
local amt = parse(ARGV[3])
local now = bmul(parse(ARGV[1]), amt)
local interval = parse(ARGV[4])
local tolerance = bmul(parse(ARGV[2]), interval)
local n = parse(ARGV[5])
local tat = now
local stored = redis.call('GET', KEYS[1])
if stored then tat = parse(stored) end
if bcmp(tat, now) < 0 then tat = now end
local one = parse('1')

-- remaining: whole tokens a request could take now with TAT t
local function remaining(t)
  local r = badd((bdivmod(bsub(badd(now, tolerance), t), interval)), one)
  if bsign(r) < 0 then return '0' end
  return sat64(r)
end

local limit = bsub(badd(tat, bmul(bsub(n, one), interval)), tolerance)
if bcmp(now, limit) < 0 then
  -- retry = limit - now ticks, in whole ms rounded up
  local q, r = bdivmod(bsub(limit, now), amt)
  if bsign(r) ~= 0 then q = badd(q, one) end
  return {0, remaining(tat), tostr(q)}
end
local new = badd(tat, bmul(n, interval))
redis.call('SET', KEYS[1], tostr(new))
-- The key may go once its TAT has passed: then it says nothing.
local q = bdivmod(bsub(new, now), amt)
local life = badd(q, parse('1000'))
if bcmp(life, parse('3153600000000')) > 0 then life = parse('3153600000000') end
redis.call('PEXPIRE', KEYS[1], tostr(life))
return {1, remaining(new), '0'}
