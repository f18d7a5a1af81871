-- Store.Allow with GCRA, on one key: a string "ms sub": the
-- theoretical arrival time (TAT) as epoch ms plus sub ticks (0 <= sub <
-- amount). Time is counted in ticks of 1/amount ms, so that the emission
-- interval (period / amount ms per token) is a whole number of ticks:
-- interval = period. The arguments: now (epoch ms), capacity and refill
-- amount (tokens), refill period (ms), tokens requested, all decimal
-- strings. The tolerance is capacity * interval. As in the throttle GCRA
-- scripts: limit = max(tat, now) + (n - 1) * interval - tolerance; denied
-- when now < limit, retry = limit - now; else the new TAT is max(tat, now)
-- + n * interval. Returns allowed (1 or 0), the whole tokens remaining and
-- the retry-after in ms (0 when allowed).
--
-- On numbers, the computation is relative to now: d = max(tat - now, 0)
-- ticks, which an admitted request leaves at most tolerance + interval,
-- so every value stays below (capacity + n + 1) * period. When that is
-- not below 2^53, or the stored TAT is beyond the exact range, it runs on
-- exact integers instead.
-- gcra_remaining returns the whole tokens a request could take now with
-- TAT now + dt ticks.
local function gcra_remaining(tol, dt, per)
  local a = tol - dt
  if a < 0 then return 0 end
  return (fdiv(a, per)) + 1
end

-- gcra_n is allow_gcra on numbers: it returns allowed, remaining,
-- retry-after, and for an admitted request the new state and the key's
-- lifetime; nil when a value would leave the exact range. t_ms and t_sub
-- are the stored TAT's strings (nil for a missing key).
local function gcra_n(t_ms, t_sub, now, cap, amt, per, n)
  if not (now < B53 and now > -B53 and cap < B53 and amt < B53 and per < B53 and n < B53) then return nil end
  local tol, np = cap * per, n * per
  if tol >= B53 or np >= B53 then return nil end
  local d = 0
  if t_ms then
    local ms, sub = num(t_ms), num(t_sub)
    if not ms or not sub then return nil end
    local dm = ms - now
    if dm >= B53 then return nil end
    if dm >= 0 then
      d = dm * amt + sub
      if d >= B53 then return nil end
    end
  end
  local x = d + np
  if x >= B53 then return nil end
  local lim = x - per - tol
  if lim > 0 then
    local q, r = fdiv(lim, amt)
    if r > 0 then q = q + 1 end
    return 0, gcra_remaining(tol, d, per), q
  end
  local q, r = fdiv(x, amt)
  local new_ms = now + q
  if new_ms >= B53 then return nil end
  -- The key may go once its TAT has passed: then it says nothing.
  local life = q + 1000
  if life > 3153600000000 then life = 3153600000000 end
  return 1, gcra_remaining(tol, x, per), 0, sformat('%d %d', new_ms, r), sformat('%d', life)
end

-- gcra_big is gcra_n on exact integers, in absolute ticks.
local function gcra_big(t_ms, t_sub, s_now, s_cap, s_amt, s_per, s_n)
  local parse, tostr, bcmp, badd, bsub, _, bmul, bdivmod, bsign, sat64 = bigs()
  local amt = parse(s_amt)
  local now = bmul(parse(s_now), amt)
  local interval = parse(s_per)
  local tolerance = bmul(parse(s_cap), interval)
  local n = parse(s_n)
  local tat = now
  if t_ms then tat = badd(bmul(parse(t_ms), amt), parse(t_sub)) end
  if bcmp(tat, now) < 0 then tat = now end
  local one = parse('1')
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
    return 0, remaining(tat), sat64(q)
  end
  local new = badd(tat, bmul(n, interval))
  local ms, sub = bdivmod(new, amt)
  local q = bdivmod(bsub(new, now), amt)
  local life = badd(q, parse('1000'))
  if bcmp(life, parse('3153600000000')) > 0 then life = parse('3153600000000') end
  return 1, remaining(new), 0, tostr(ms) .. ' ' .. tostr(sub), tostr(life)
end

local function allow_gcra(key, s_now, s_cap, s_amt, s_per, s_n)
  local v = redis.call('GET', key)
  local t_ms, t_sub
  if v then
    local sp = sfind(v, ' ', 1, true)
    t_ms, t_sub = ssub(v, 1, sp - 1), ssub(v, sp + 1)
  end
  local now, cap, amt, per, n = tonumber(s_now), tonumber(s_cap), tonumber(s_amt), tonumber(s_per), tonumber(s_n)
  local allowed, remaining, retry, state, life = gcra_n(t_ms, t_sub, now, cap, amt, per, n)
  if allowed == nil then
    allowed, remaining, retry, state, life = gcra_big(t_ms, t_sub, s_now, s_cap, s_amt, s_per, s_n)
  end
  if state then redis.call('SET', key, state, 'PX', life) end
  return allowed, remaining, retry
end
