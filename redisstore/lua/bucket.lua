-- The token-bucket math of the limiter (integer millitokens, epoch
-- milliseconds, floor division, results saturated to int64), on the exact
-- integers of int.lua. Every function takes and returns decimal strings.

local parse, tostr, bcmp, badd, bsub, bneg, bmul, bdivmod, bsign, sat64 = bigs()
local B1, B1000 = parse('1'), parse('1000')

-- refill_exact returns the balance (a big, exact) and the last-refill time
-- (a string, saturated) of a bucket advanced to now: the tokens earned are
-- elapsed * amount // period, and the clock advances only by the time that
-- produced them, so a sub-millitoken remainder is kept.
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

local function refill(tokens, last, now, cap, amount, period)
  local tk, l = refill_exact(tokens, last, now, cap, amount, period)
  return sat64(tk), l
end

-- retry_after_exact returns the milliseconds (exact, a string) until a
-- bucket regains deficit (a big): deficit * period // amount + 1; "0" for
-- no deficit; nil for "never" (a zero refill amount).
local function retry_after_exact(deficit, amount, period)
  if bsign(deficit) <= 0 then return '0' end
  local amt = parse(amount)
  if bsign(amt) == 0 then return nil end
  local t = bdivmod(bmul(deficit, parse(period)), amt)
  return tostr(badd(t, B1))
end

-- try_consume refills and takes requested whole tokens if the balance
-- covers them. Returns success (bool), the new balance, the new last-refill
-- time, the available whole tokens before the request, and the retry-after
-- in milliseconds (see retry_after_exact).
local function try_consume(tokens, last, now, cap, amount, period, requested)
  local cur, l = refill_exact(tokens, last, now, cap, amount, period)
  local req = bmul(parse(requested), B1000)
  local avail = sat64((bdivmod(cur, B1000)))
  if bcmp(cur, req) >= 0 then
    return true, sat64(bsub(cur, req)), l, avail, '0'
  end
  return false, sat64(cur), l, avail, retry_after_exact(bsub(req, cur), amount, period)
end

local function force_consume(tokens, last, now, cap, amount, period, n)
  local cur, l = refill_exact(tokens, last, now, cap, amount, period)
  return sat64(bsub(cur, bmul(parse(n), B1000))), l
end

local function available(tokens, last, now, cap, amount, period)
  local cur = refill_exact(tokens, last, now, cap, amount, period)
  return sat64((bdivmod(cur, B1000)))
end

local function time_until_available(tokens, last, now, cap, amount, period, needed)
  local cur = refill_exact(tokens, last, now, cap, amount, period)
  local need = bmul(parse(needed), B1000)
  if bcmp(cur, need) >= 0 then return '0' end
  return retry_after_exact(bsub(need, cur), amount, period)
end
