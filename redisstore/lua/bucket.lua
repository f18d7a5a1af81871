-- The token-bucket math of the limiter (integer millitokens, epoch
-- milliseconds, floor division, results saturated to int64), twice: on
-- Lua numbers (the *_n functions), which return nil as soon as a value
-- would leave the exact range (see num and B53), and on the exact
-- integers of int.lua (bucket_big). The functions without a suffix take
-- and return decimal strings: they try the numbers first and redo the
-- computation exactly only when that gave up, so the big integers are paid
-- for only by values that need them.

-- refill_n advances a bucket to now (see refill_big for the formula). To
-- keep products small the elapsed time is split into whole periods k and
-- a remainder r, and the amount into whole multiples a1 of the period and
-- a remainder a0: elapsed * amount = (k * amount + r * a1) * period +
-- r * a0, so the tokens earned are k * amount + r * a1 + (r * a0) //
-- period and the sub-millitoken remainder is (r * a0) % period, with
-- r * a0 < period^2.
local function refill_n(tk, last, now, cap, amt, per)
  local elapsed = now - last
  if elapsed <= 0 or per == 0 or amt == 0 then return tk, last end
  if elapsed >= B53 or per < 0 or amt < 0 then return nil end
  local k, r = fdiv(elapsed, per)
  local a1, a0 = fdiv(amt, per)
  local x = r * a0
  if x >= B53 then return nil end
  local q, rem = fdiv(x, per)
  local add = k * amt
  if add >= B53 then return nil end
  add = add + r * a1 + q
  if add >= B53 then return nil end
  if add == 0 then return tk, last end
  -- A sum at or past 2^53 is above cap (< 2^53) whichever way it rounded.
  local t = tk + add
  if t > cap then t = cap end
  local used, c = fdiv(rem, amt)
  if c > 0 then used = used + 1 end
  local l = now - used
  if l <= -B53 then return nil end
  return t, l
end

-- retry_n returns the milliseconds until a bucket regains deficit (> 0):
-- deficit * period // amount + 1, as q * period + (r * period) // amount
-- + 1 with deficit = q * amount + r; math.huge for "never" (a zero
-- amount).
local function retry_n(deficit, amt, per)
  if amt == 0 then return math.huge end
  if amt < 0 or per < 0 then return nil end
  local q, r = fdiv(deficit, amt)
  local qp, rp = q * per, r * per
  if qp >= B53 or rp >= B53 then return nil end
  local t = qp + fdiv(rp, amt) + 1
  if t >= B53 then return nil end
  return t
end

-- milli returns n * 1000 when it is exact.
local function milli(n)
  local v = n * 1000
  if v >= B53 or v <= -B53 then return nil end
  return v
end

-- whole returns floor(v / 1000) for exact v: v - (v mod 1000) is a
-- multiple of 1000, even, so exact below 2^54.
local function whole(v)
  local r = fmod(v, 1000)
  if r < 0 then r = r + 1000 end
  return (v - r) / 1000
end

-- try_consume_n: see try_consume. The retry-after is a number (math.huge
-- for never).
local function try_consume_n(tk, last, now, cap, amt, per, n)
  local cur, l = refill_n(tk, last, now, cap, amt, per)
  local req = milli(n)
  if not cur or not req then return nil end
  local avail = whole(cur)
  local d = cur - req
  if d >= 0 then
    if d >= B53 then return nil end
    return true, d, l, avail, 0
  end
  if d <= -B53 then return nil end
  local retry = retry_n(-d, amt, per)
  if not retry then return nil end
  return false, cur, l, avail, retry
end

-- bucket_big returns the functions on exact integers, built on first use.
local bucket_big_fns
local function bucket_big()
  if bucket_big_fns then return bucket_big_fns end
  local parse, tostr, bcmp, badd, bsub, bneg, bmul, bdivmod, bsign, sat64 = bigs()
  local B1, B1000 = parse('1'), parse('1000')

  -- refill_exact returns the balance (a big, exact) and the last-refill
  -- time (a string, saturated) of a bucket advanced to now: the tokens
  -- earned are elapsed * amount // period, and the clock advances only by
  -- the time that produced them, so a sub-millitoken remainder is kept.
  local function refill_exact(tokens, last, now, cap, amount, period)
    local tk = parse(tokens)
    local elapsed = bsub(parse(now), parse(last))
    local per = parse(period)
    if bsign(elapsed) <= 0 or bsign(per) == 0 then
      return tk, last
    end
    local amt = parse(amount)
    local add, rem = bdivmod(bmul(elapsed, amt), per)
    if bsign(add) == 0 then
      return tk, last
    end
    tk = badd(tk, add)
    local c = parse(cap)
    if bcmp(tk, c) > 0 then tk = c end
    local used = bdivmod(bneg(rem), amt)
    return tk, sat64(badd(parse(now), used))
  end

  -- retry_after_exact returns the milliseconds (exact, a string) until a
  -- bucket regains deficit (a big): deficit * period // amount + 1; "0"
  -- for no deficit; nil for "never" (a zero refill amount).
  local function retry_after_exact(deficit, amount, period)
    if bsign(deficit) <= 0 then return '0' end
    local amt = parse(amount)
    if bsign(amt) == 0 then return nil end
    local t = bdivmod(bmul(deficit, parse(period)), amt)
    return tostr(badd(t, B1))
  end

  local z = {}
  function z.refill(tokens, last, now, cap, amount, period)
    local tk, l = refill_exact(tokens, last, now, cap, amount, period)
    return sat64(tk), l
  end
  function z.retry_after(deficit, amount, period)
    return retry_after_exact(parse(deficit), amount, period)
  end
  function z.try_consume(tokens, last, now, cap, amount, period, requested)
    local cur, l = refill_exact(tokens, last, now, cap, amount, period)
    local req = bmul(parse(requested), B1000)
    local avail = sat64((bdivmod(cur, B1000)))
    if bcmp(cur, req) >= 0 then
      return true, sat64(bsub(cur, req)), l, avail, '0'
    end
    return false, sat64(cur), l, avail, retry_after_exact(bsub(req, cur), amount, period)
  end
  function z.force_consume(tokens, last, now, cap, amount, period, n)
    local cur, l = refill_exact(tokens, last, now, cap, amount, period)
    return sat64(bsub(cur, bmul(parse(n), B1000))), l
  end
  function z.available(tokens, last, now, cap, amount, period)
    local cur = refill_exact(tokens, last, now, cap, amount, period)
    return sat64((bdivmod(cur, B1000)))
  end
  function z.time_until_available(tokens, last, now, cap, amount, period, needed)
    local cur = refill_exact(tokens, last, now, cap, amount, period)
    local need = bmul(parse(needed), B1000)
    if bcmp(cur, need) >= 0 then return '0' end
    return retry_after_exact(bsub(need, cur), amount, period)
  end
  bucket_big_fns = z
  return z
end

-- The fast path of each function, on numbers; nil when it gave up.
local bucket_fast = {}
function bucket_fast.refill(tk, last, now, cap, amt, per)
  return refill_n(tk, last, now, cap, amt, per)
end
function bucket_fast.retry_after(deficit, amt, per)
  if deficit <= 0 then return 0 end
  return retry_n(deficit, amt, per)
end
bucket_fast.try_consume = try_consume_n
function bucket_fast.force_consume(tk, last, now, cap, amt, per, n)
  local cur, l = refill_n(tk, last, now, cap, amt, per)
  local req = milli(n)
  if not cur or not req then return nil end
  local v = cur - req
  if v >= B53 or v <= -B53 then return nil end
  return v, l
end
function bucket_fast.available(tk, last, now, cap, amt, per)
  local cur = refill_n(tk, last, now, cap, amt, per)
  if not cur then return nil end
  return whole(cur)
end
function bucket_fast.time_until_available(tk, last, now, cap, amt, per, needed)
  local cur = refill_n(tk, last, now, cap, amt, per)
  local need = milli(needed)
  if not cur or not need then return nil end
  local d = need - cur
  if d <= 0 then return 0 end
  if d >= B53 then return nil end
  return retry_n(d, amt, per)
end

-- ms formats a retry-after of the fast path: nil for never.
local function ms(v)
  if v == math.huge then return nil end
  return fmt(v)
end

-- bucket_call runs function fn of the bucket math on decimal strings: on
-- numbers when every argument is exact and the fast path does not give
-- up, else on exact integers. Results are decimal strings (booleans stay
-- booleans; a retry-after of never is nil), identical either way.
local function bucket_call(fn, ...)
  local args = {...}
  local nums = {}
  for i = 1, #args do
    nums[i] = num(args[i])
    if not nums[i] then return bucket_big()[fn](...) end
  end
  local out = {bucket_fast[fn](unpack(nums))}
  if out[1] == nil then return bucket_big()[fn](...) end
  if fn == 'try_consume' then
    return out[1], fmt(out[2]), fmt(out[3]), fmt(out[4]), ms(out[5])
  elseif fn == 'retry_after' or fn == 'time_until_available' then
    return ms(out[1])
  end
  for i = 1, #out do out[i] = fmt(out[i]) end
  return unpack(out)
end
