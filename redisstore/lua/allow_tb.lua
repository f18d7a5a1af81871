-- Store.Allow with the token bucket, on one key: a string "tk rf"
-- (balance in millitokens, refill time in epoch ms). The arguments: now
-- (epoch ms), capacity, refill amount (both millitokens), refill period
-- (ms), tokens requested, all decimal strings. A missing key is a full
-- bucket. Returns allowed (1 or 0), the whole tokens remaining and the
-- retry-after in ms (0 when allowed, -1 for never). On numbers when they stay exact (the
-- common case), else on exact integers.
local function allow_token_bucket(key, s_now, s_cap, s_amt, s_per, s_n)
  local now, cap, amt, per, n = tonumber(s_now), tonumber(s_cap), tonumber(s_amt), tonumber(s_per), tonumber(s_n)
  local v = redis.call('GET', key)
  local tk, rf = cap, now
  if v then
    local sp = sfind(v, ' ', 1, true)
    tk, rf = tonumber(ssub(v, 1, sp - 1)), tonumber(ssub(v, sp + 1))
  end
  local ok, ntk, nrf, avail, retry
  -- The client sends int64 values (capacity, amount and period positive,
  -- n not negative): they are exact below 2^53.
  if now < B53 and now > -B53 and cap < B53 and amt < B53 and per < B53 and n < B53 and
      tk and tk < B53 and tk > -B53 and rf and rf < B53 and rf > -B53 then
    ok, ntk, nrf, avail, retry = try_consume_n(tk, rf, now, cap, amt, per, n)
  end
  if ok == nil then
    -- the exact path: everything as decimal strings
    local s_tk, s_rf = s_cap, s_now
    if v then
      local sp = sfind(v, ' ', 1, true)
      s_tk, s_rf = ssub(v, 1, sp - 1), ssub(v, sp + 1)
    end
    local z = bucket_big()
    local s_ntk, s_nrf, s_avail, s_retry
    ok, s_ntk, s_nrf, s_avail, s_retry = z.try_consume(s_tk, s_rf, s_now, s_cap, s_amt, s_per, s_n)
    if not ok then
      if not s_retry then return 0, s_avail, -1 end
      return 0, s_avail, imin(s_retry, MAX64)
    end
    -- The key may go once the bucket is full again; any later time will do.
    local full = z.retry_after(isub(s_cap, s_ntk), s_amt, s_per)
    local life = 3153600000000
    if full and icmp(full, '3153599999000') < 0 then life = tonumber(full) + 1000 end
    redis.call('SET', key, s_ntk .. ' ' .. s_nrf, 'PX', fmt(life))
    return 1, z.available(s_ntk, s_nrf, s_nrf, s_cap, s_amt, s_per), 0
  end
  if not ok then
    if retry == HUGE then retry = -1 end
    return 0, avail, retry
  end
  -- The key may go once the bucket is full again (a missing key is full):
  -- its lifetime is an upper bound of that time, computed in floating
  -- point with a margin far above its rounding error.
  local life = (cap - ntk) / amt * per * 1.000001 + 1001
  if life > 3153600000000 then life = 3153600000000 elseif life < 1000 then life = 1000 end
  redis.call('SET', key, sformat('%d %d', ntk, nrf), 'PX', sformat('%d', mceil(life)))
  return 1, whole(ntk), 0
end
