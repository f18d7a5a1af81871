-- Exact integer arithmetic on decimal strings.
--
-- Redis runs Lua 5.1, whose numbers are doubles: exact for integers up to
-- 2^53 only. Balances, counters and times are int64 values (and the refill
-- math needs 128-bit intermediates), so every number is kept as its decimal
-- string and computed with these functions: small values (at most 15
-- digits) with doubles, which is exact for them, larger ones with the
-- arbitrary-precision integers below (base 10^7 limbs, little-endian, with
-- a sign flag). Results are canonical decimal strings ("0", "-12"), never
-- "-0" or leading zeros, so equal values compare equal as strings.

-- Numbers on the fast path. A Lua number holds every integer of
-- magnitude below 2^53 exactly, and +, - and * of exact integers round
-- monotonically: a result is exact exactly when its magnitude (as
-- computed) stays below 2^53. So the fast path checks each operand with
-- num and each sum or product against B53, and gives up (returns nil) the
-- moment one leaves the range; the caller then redoes the whole
-- computation with the arbitrary-precision integers. math.fmod is exact
-- on doubles, which makes floor division exact too.
local fmod, mceil, HUGE = math.fmod, math.ceil, math.huge
local sfind, ssub, sformat = string.find, string.sub, string.format
local B53 = 9007199254740992

-- num returns decimal string s as a number when it is exact (|s| < 2^53),
-- else nil.
local function num(s)
  local v = tonumber(s)
  if v and v < B53 and v > -B53 then return v end
  return nil
end

-- fdiv returns floor(a / b) and the remainder a - floor(a / b) * b (in
-- [0, b)) for exact a >= 0 and b > 0.
local function fdiv(a, b)
  local r = fmod(a, b)
  return (a - r) / b, r
end

local BASE = 10000000
local BASE_DIGITS = 7
local MAX64 = '9223372036854775807'
local MIN64 = '-9223372036854775808'

local function small(s)
  return #s <= 15
end

local function fmt(n)
  return string.format('%d', n)
end

-- The arbitrary-precision integers, built on first use (most calls of
-- most scripts never need them): big() returns their functions.
local big_fns
local function big()
  if big_fns then return big_fns end
  -- big: {neg = bool, [1..n] = limbs}, n >= 1, no high zero limbs.
  local function parse(s)
    local b = {neg = false}
    local i = 1
    if string.sub(s, 1, 1) == '-' then b.neg = true; i = 2 end
    local digits = string.sub(s, i)
    local n = 0
    local e = #digits
    while e >= 1 do
      local st = math.max(1, e - BASE_DIGITS + 1)
      n = n + 1
      b[n] = tonumber(string.sub(digits, st, e))
      e = st - 1
    end
    if n == 0 then b[1] = 0; n = 1 end
    while n > 1 and b[n] == 0 do b[n] = nil; n = n - 1 end
    if n == 1 and b[1] == 0 then b.neg = false end
    return b
  end

  local function tostr(b)
    local n = #b
    local parts = {tostring(b[n])}
    for i = n - 1, 1, -1 do
      parts[#parts + 1] = string.format('%07d', b[i])
    end
    local s = table.concat(parts)
    if b.neg and s ~= '0' then s = '-' .. s end
    return s
  end

  local function trim(b)
    local n = #b
    while n > 1 and b[n] == 0 do b[n] = nil; n = n - 1 end
    if n == 1 and b[1] == 0 then b.neg = false end
    return b
  end

  -- magnitudes
  local function mcmp(a, b)
    if #a ~= #b then return #a < #b and -1 or 1 end
    for i = #a, 1, -1 do
      if a[i] ~= b[i] then return a[i] < b[i] and -1 or 1 end
    end
    return 0
  end

  local function madd(a, b)
    local r = {neg = false}
    local carry = 0
    for i = 1, math.max(#a, #b) do
      local v = (a[i] or 0) + (b[i] or 0) + carry
      if v >= BASE then r[i] = v - BASE; carry = 1 else r[i] = v; carry = 0 end
    end
    if carry > 0 then r[#r + 1] = carry end
    return r
  end

  -- |a| - |b|, |a| >= |b|
  local function msub(a, b)
    local r = {neg = false}
    local borrow = 0
    for i = 1, #a do
      local v = a[i] - (b[i] or 0) - borrow
      if v < 0 then r[i] = v + BASE; borrow = 1 else r[i] = v; borrow = 0 end
    end
    return trim(r)
  end

  local function bcmp(a, b)
    if a.neg ~= b.neg then return a.neg and -1 or 1 end
    local c = mcmp(a, b)
    if a.neg then return -c end
    return c
  end

  local function badd(a, b)
    if a.neg == b.neg then
      local r = madd(a, b)
      r.neg = a.neg
      return trim(r)
    end
    local c = mcmp(a, b)
    if c == 0 then return {neg = false, 0} end
    if c > 0 then
      local r = msub(a, b); r.neg = a.neg; return trim(r)
    end
    local r = msub(b, a); r.neg = b.neg; return trim(r)
  end

  local function bneg(a)
    local r = {neg = not a.neg}
    for i = 1, #a do r[i] = a[i] end
    return trim(r)
  end

  local function bsub(a, b) return badd(a, bneg(b)) end

  local function bmul(a, b)
    local r = {neg = a.neg ~= b.neg}
    for i = 1, #a + #b do r[i] = 0 end
    for i = 1, #a do
      local carry = 0
      local ai = a[i]
      for j = 1, #b do
        local v = r[i + j - 1] + ai * b[j] + carry
        carry = math.floor(v / BASE)
        r[i + j - 1] = v - carry * BASE
      end
      local k = i + #b
      while carry > 0 do
        local v = r[k] + carry
        carry = math.floor(v / BASE)
        r[k] = v - carry * BASE
        k = k + 1
      end
    end
    return trim(r)
  end

  local function approx(a)
    local v = 0
    for i = #a, 1, -1 do v = v * BASE + a[i] end
    return v
  end

  -- b times a small non-negative integer q < BASE (magnitude)
  local function mmulsmall(b, q)
    local r = {neg = false}
    local carry = 0
    for i = 1, #b do
      local v = b[i] * q + carry
      carry = math.floor(v / BASE)
      r[i] = v - carry * BASE
    end
    local k = #b + 1
    while carry > 0 do
      r[k] = carry % BASE
      carry = math.floor(carry / BASE)
      k = k + 1
    end
    if #r == 0 then r[1] = 0 end
    return trim(r)
  end

  -- |a| // |b|, |a| % |b| (truncating, magnitudes); b ~= 0
  local function mdivmod(a, b)
    local q = {neg = false}
    local r = {neg = false, 0}
    local bv = approx(b)
    for i = #a, 1, -1 do
      -- r = r * BASE + a[i]
      table.insert(r, 1, a[i])
      r = trim(r)
      local d = 0
      if mcmp(r, b) >= 0 then
        d = math.floor(approx(r) / bv)
        if d >= BASE then d = BASE - 1 end
        local t = mmulsmall(b, d)
        while mcmp(t, r) > 0 do
          d = d - 1
          t = msub(t, b)
        end
        local t2 = madd(t, b)
        while mcmp(t2, r) <= 0 do
          d = d + 1
          t = t2
          t2 = madd(t, b)
        end
        r = msub(r, t)
      end
      q[i] = d
    end
    if #q == 0 then q[1] = 0 end
    return trim(q), trim(r)
  end

  -- floor division with Python's semantics: q = floor(a / b), r = a - q*b
  -- takes the sign of b.
  local function bdivmod(a, b)
    local q, r = mdivmod(a, b)
    local neg = a.neg ~= b.neg
    q.neg = neg
    r.neg = a.neg
    q = trim(q)
    r = trim(r)
    if neg and not (#r == 1 and r[1] == 0) then
      q = bsub(q, parse('1'))
      r = badd(r, b)
    end
    return q, r
  end

  local function bsign(a)
    if #a == 1 and a[1] == 0 then return 0 end
    return a.neg and -1 or 1
  end

  -- sat64 clamps a big to the int64 range and returns its string.
  local function sat64(b)
    if #b < 3 then return tostr(b) end -- below 10^14
    if bcmp(b, parse(MAX64)) > 0 then return MAX64 end
    if bcmp(b, parse(MIN64)) < 0 then return MIN64 end
    return tostr(b)
  end

  big_fns = {parse = parse, tostr = tostr, bcmp = bcmp, badd = badd, bsub = bsub, bneg = bneg,
    bmul = bmul, bdivmod = bdivmod, bsign = bsign, sat64 = sat64}
  return big_fns
end

-- bigs returns the functions of big() as values, for a script to bind to
-- locals: local parse, tostr, ... = bigs()
local function bigs()
  local b = big()
  return b.parse, b.tostr, b.bcmp, b.badd, b.bsub, b.bneg, b.bmul, b.bdivmod, b.bsign, b.sat64
end

-- The string interface used by the scripts.

local function iadd(a, b)
  if small(a) and small(b) then return fmt(tonumber(a) + tonumber(b)) end
  local z = big(); return z.tostr(z.badd(z.parse(a), z.parse(b)))
end

local function isub(a, b)
  if small(a) and small(b) then return fmt(tonumber(a) - tonumber(b)) end
  local z = big(); return z.tostr(z.bsub(z.parse(a), z.parse(b)))
end

local function icmp(a, b)
  if small(a) and small(b) then
    local x, y = tonumber(a), tonumber(b)
    if x < y then return -1 elseif x > y then return 1 end
    return 0
  end
  local z = big(); return z.bcmp(z.parse(a), z.parse(b))
end

local function imin(a, b)
  if icmp(a, b) <= 0 then return a end
  return b
end

