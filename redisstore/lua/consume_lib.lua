-- Speculative consumption: a request takes its amounts (millitokens) from
-- its item when the item exists, has not expired, stores every resolved
-- limit with exactly the resolved parameters, holds every limit named, and
-- covers every positive amount. It takes from the stored balances without
-- refilling while that is exact: when a limit it takes a positive amount
-- from may have refilled to its capacity by now (see full), every limit of
-- the item is refilled to now first and rf set to now, in the same step,
-- as a read-then-write would (store.RefillDue).
--
-- ARGV per request: now, the number of resolved limits, each as its field
-- ("l:" .. name) and "cp|ra|rp" (compared with the prefix of the field's
-- value), the number of amounts, each as field and millitokens. In a call
-- of several requests, one whose resolved limits are exactly the previous
-- request's sends '=' instead of their count and arguments, one whose
-- amounts are the previous request's too sends '*' instead of both, and
-- one whose now is the previous request's as well sends '"' alone: a
-- batch of requests under the same limits carries them once, of the same
-- amounts too, once, and of the same millisecond, one argument a request.
-- The arguments are read in place, by index: the common request allocates
-- little.

local find, sub, byte, format = string.find, string.sub, string.byte, string.format

-- count and decimal convert the small counts of the arguments and the
-- reply by comparing with constants, not by a parse (strtod) or a format
-- (printf) on every call; as plain functions they cost little to define
-- when the code runs as a script, defined again on every call.
local function count(s)
  if s == '1' then return 1 elseif s == '2' then return 2 elseif s == '0' then return 0 end
  return tonumber(s)
end

local function decimal(n)
  if n == 4 then return '4' elseif n == 6 then return '6' elseif n == 8 then return '8' elseif n == 2 then return '2' elseif n == 0 then return '0' end
  return tostring(n)
end

-- field returns the index in flat (an HGETALL reply) of the value of
-- field f (a limit's field, "l:" .. its name, as the client sends it).
local function field(flat, f)
  for i = 1, #flat, 2 do
    if flat[i] == f then return i + 1 end
  end
end

-- limit_parts returns the capacity, refill amount, refill period and
-- balance of limit value v (cp|ra|rp|tk|tc), and the positions of the
-- separators around the balance.
local function limit_parts(v)
  local a = find(v, '|', 1, true)
  local b = find(v, '|', a + 1, true)
  local c = find(v, '|', b + 1, true)
  local d = find(v, '|', c + 1, true)
  return sub(v, 1, a - 1), sub(v, a + 1, b - 1), sub(v, b + 1, c - 1), sub(v, c + 1, d - 1), c, d
end

-- full reports whether the limit of value v, last refilled at rf, may have
-- refilled to its capacity by now (bucketmath.FullAtMs): its balance is at
-- its capacity already, or (with a positive refill amount and period) the
-- refill up to now reaches it. Taking from its stored balance is then not
-- exact: the capped refill would credit the tokens taken back.
local function full(v, rf, now)
  local cp, ra, rp, tk = limit_parts(v)
  if icmp(tk, cp) >= 0 then return true end
  if icmp(ra, '0') <= 0 or icmp(rp, '0') <= 0 then return false end
  return icmp((bucket_call('refill', tk, rf, now, cp, ra, rp)), cp) >= 0
end

-- refilled returns limit value v with its balance refilled from rf to now
-- (capped at its capacity).
local function refilled(v, rf, now)
  local cp, ra, rp, tk, c, d = limit_parts(v)
  return sub(v, 1, c) .. (bucket_call('refill', tk, rf, now, cp, ra, rp)) .. sub(v, d)
end

-- params_seen maps the parameters of a limit as the client sends them
-- ("cp|ra|rp") to their numbers {cp, ra, rp} (nil for one that is not
-- exact, see num), so that a request's refill check parses no
-- parameters: as a function library the table lives as long as the
-- library (bounded: it starts over past 256 entries); as a script, for one
-- call.
local params_seen, params_count = {}, 0

-- params_of returns the numbers of parameters p (see params_seen).
local function params_of(p)
  local x = params_seen[p]
  if not x then
    local a = find(p, '|', 1, true)
    local b = a and find(p, '|', a + 1, true)
    if b then
      x = {num(sub(p, 1, a - 1)), num(sub(p, a + 1, b - 1)), num(sub(p, b + 1))}
    else
      x = {}
    end
    if params_count >= 256 then params_seen, params_count = {}, 0 end
    params_seen[p], params_count = x, params_count + 1
  end
  return x[1], x[2], x[3]
end

-- amounts_seen maps an amount as the client sends it (millitokens) to
-- its number (false for one that is not exact, see num), as params_seen
-- does parameters: requests repeat their amounts, so a request's amounts
-- are looked up rather than parsed.
local amounts_seen, amounts_count = {}, 0

-- amount_of returns the number of amount s, nil when it is not exact.
local function amount_of(s)
  local x = amounts_seen[s]
  if x == nil then
    x = num(s) or false
    if amounts_count >= 256 then amounts_seen, amounts_count = {}, 0 end
    amounts_seen[s], amounts_count = x, amounts_count + 1
  end
  return x or nil
end

-- The stored strings a consume wrote lately, parsed: a limit's value
-- (cp|ra|rp|tk|tc) to its balance and total (numbers), and a header
-- (rf|sc|cas|ttl|par) to its refill time, its expiry time (ms; false for
-- none) and its text from the first separator on. A consume writes most
-- of what the next one on the item reads, and Redis's Lua keeps one copy
-- of each string content, so the next read finds its values here by one
-- lookup instead of parsing them. Each entry is a function of its key's
-- content alone, whichever item it came from. As a function library the
-- tables live as long as the library (they start over past 1024
-- entries); as a script, for one call.
local val_tk, val_tc, hdr_rf, hdr_exp, hdr_tail, seen_count = {}, {}, {}, {}, {}, 0

-- last_now and last_nown are the last request time check_small parsed
-- (as the client sent it) and its number (nil when it is not exact):
-- requests of the same millisecond send the same string, which Lua keeps
-- once, so the next compares one reference instead of parsing (strtod).
local last_now, last_nown

-- remember_value records that limit value v holds balance t and total c.
local function remember_value(v, t, c)
  if seen_count >= 1024 then
    val_tk, val_tc, hdr_rf, hdr_exp, hdr_tail, seen_count = {}, {}, {}, {}, {}, 0
  end
  val_tk[v], val_tc[v], seen_count = t, c, seen_count + 1
end

-- remember_header records that header h holds refill time rf, expiry
-- time e (ms, false for none) and, from its first separator on, tail.
local function remember_header(h, rf, e, tail)
  if seen_count >= 1024 then
    val_tk, val_tc, hdr_rf, hdr_exp, hdr_tail, seen_count = {}, {}, {}, {}, {}, 0
  end
  hdr_rf[h], hdr_exp[h], hdr_tail[h], seen_count = rf, e, tail, seen_count + 1
end

-- resolved_params returns the parameters ("cp|ra|rp") the request sends
-- for limit field f (its resolved limits start after index li, nl of
-- them); nil when f is not one of them.
local function resolved_params(argv, li, nl, f)
  for k = li + 1, li + 2 * nl, 2 do
    if argv[k] == f then return argv[k + 1] end
  end
end

-- refill_n_of returns the balance of limit value v (whose parameters are
-- p, a prefix of v as check verified) refilled from rf to now, all
-- numbers, and the positions of the separators around the balance in v;
-- nil when a value is not exact or the refill leaves the exact range (the
-- caller then takes the exact path on strings). full is whether that
-- balance reached the capacity (bucketmath.FullAtMs at or before now).
local function refill_n_of(v, p, rf, now)
  local cp, ra, rp = params_of(p)
  if not (cp and ra and rp) then return nil end
  local c = #p + 1
  local d = find(v, '|', c + 1, true)
  local tk = d and num(sub(v, c + 1, d - 1))
  if not tk then return nil end
  -- refill_n caps a balance above the capacity too, as refilled does
  local t = refill_n(tk, rf, now, cp, ra, rp)
  if t == nil then return nil end
  return t, tk >= cp or t >= cp, c, d
end

-- refill_due returns, when a request that takes a positive amount from a
-- limit that may be full (see full) must refill item flat to now first,
-- what the refill writes, by index in flat: rv, the values of the header
-- (rf = now) and of the limits refilled on the exact strings; rn, the
-- refilled balances (numbers) of the limits refilled on numbers, and rd,
-- the position in flat's value of the separator after each one's balance
-- (its total follows). It returns nil when the request can take from the
-- stored balances (none may be full, or now is not after rf). hi is the
-- index of the header's value; the request's resolved limits follow index
-- li (nl of them), its amounts index ci (nc of them). A now not after rf
-- returns before any limit is looked at (no refill is due then, whatever
-- the balances). The limits the request resolved are checked and refilled
-- on numbers, their parameters from the request (params_of); any other
-- limit, or a value out of the exact range, on the exact strings (full,
-- refilled).
local function refill_due(argv, flat, now, hi, li, nl, ci, nc)
  if not hi then return nil end
  local h = flat[hi]
  local bar = find(h, '|', 1, true)
  local rf = sub(h, 1, bar - 1)
  local rfn, nown = num(rf), num(now)
  if rfn and nown then
    if nown <= rfn then return nil end
  elseif icmp(now, rf) <= 0 then
    return nil
  end
  local due = false
  -- the index, refilled balance and separator of the limit found full
  local fi, ft, fd
  for k = ci + 1, ci + 2 * nc, 2 do
    local amt = argv[k + 1]
    if amt ~= '0' and byte(amt, 1) ~= 45 then
      local f = argv[k]
      local i = field(flat, f)
      if i then
        local isfull
        local p = rfn and nown and resolved_params(argv, li, nl, f)
        if p then
          local t, fl, _, d = refill_n_of(flat[i], p, rfn, nown)
          if t then isfull, fi, ft, fd = fl, i, t, d end
        end
        if isfull == nil then isfull = full(flat[i], rf, now) end
        if isfull then
          due = true
          break
        end
      end
    end
  end
  if not due then return nil end
  local rv, rn, rd = {[hi] = now .. sub(h, bar)}, {}, {}
  for i = 1, #flat, 2 do
    local f = flat[i]
    if byte(f, 1) == 108 and byte(f, 2) == 58 then -- 'l:'
      local v = flat[i + 1]
      if i + 1 == fi then
        rn[fi], rd[fi] = ft, fd
      else
        local p = rfn and nown and resolved_params(argv, li, nl, f)
        local t, _, d
        if p then t, _, _, d = refill_n_of(v, p, rfn, nown) end
        if t then
          rn[i + 1], rd[i + 1] = t, d
        else
          rv[i + 1] = refilled(v, rf, now)
        end
      end
    end
  end
  return rv, rn, rd
end

-- read_request reads the request whose arguments follow index a of argv
-- (the call's ARGV):
-- it returns its now, the index of its limits' count (li) and that count
-- (nl), the index of its amounts' count (ci) and that count (nc), and the
-- index its arguments end at. A request of a call of several whose
-- resolved limits are the previous request's sends '=' in place of them,
-- one whose amounts are the previous request's too '*' in place of both,
-- one whose now is the previous request's as well '"' in place of all
-- (see the head of this file); pli, pnl, pci, pnc and pnow are the
-- previous request's li, nl, ci, nc and now, which it then returns.
local function read_request(argv, a, pli, pnl, pci, pnc, pnow)
  local t = argv[a + 1]
  if pli and t == '"' then return pnow, pli, pnl, pci, pnc, a + 1 end
  local c = argv[a + 2]
  if pli then
    if c == '=' then
      local ci = a + 3
      local nc = count(argv[ci])
      return t, pli, pnl, ci, nc, ci + 2 * nc
    elseif c == '*' then
      return t, pli, pnl, pci, pnc, a + 2
    end
  end
  local nl = count(c)
  local ci = a + 3 + 2 * nl
  local nc = count(argv[ci])
  return t, a + 2, nl, ci, nc, ci + 2 * nc
end

-- check_any returns why the request read by read_request (from argv) cannot
-- take its amounts from item flat (an HGETALL reply); when it can: '', then
-- the first field to write, its value and its index in flat (nil when
-- nothing is written), then the other fields to write (field, value, ...)
-- and their indexes in flat (nil when none). The balance and total move on
-- numbers while they stay exact, else on the exact integers of int.lua.
-- Substrings and patterns are avoided where a plain find will do: every
-- new string is hashed as Redis's Lua creates it.
local function check_any(argv, flat, now, li, nl, ci, nc)
  local n = #flat
  if n == 0 then return 'bucket_missing' end
  local hi
  for i = 1, n, 2 do
    if flat[i] == 'h' then
      hi = i + 1
      -- h is rf|sc|cas|ttl|par: the expiry time follows the third separator
      local h = flat[i + 1]
      local a = find(h, '|', 1, true)
      a = a and find(h, '|', a + 1, true)
      a = a and find(h, '|', a + 1, true)
      local b = a and find(h, '|', a + 1, true)
      if a and b ~= a + 1 then
        local ttl = sub(h, a + 1, (b or 0) - 1)
        if ttl ~= '0' then
          -- expired at now (ms) from ttl (s) on; on numbers when exact
          if #ttl <= 12 and #now <= 15 then
            if tonumber(ttl) * 1000 <= tonumber(now) then return 'bucket_expired' end
          elseif expired(ttl, now) then
            return 'bucket_expired'
          end
        end
      end
      break
    end
  end
  -- The first limit's field, parameters, index in flat and the position
  -- of its balance, for its amount.
  local f1, p1, i1, s1
  for k = li + 1, li + 2 * nl, 2 do
    local f = argv[k]
    local i = field(flat, f)
    if not i then return 'limit_missing' end
    local p = argv[k + 1]
    local v = flat[i]
    local m = #p
    -- the value is cp|ra|rp|tk|tc and p is cp|ra|rp
    if byte(v, m + 1) ~= 124 or find(v, p, 1, true) ~= 1 then return 'limits_changed' end
    if not i1 then f1, p1, i1, s1 = f, p, i, m + 1 end
  end
  -- The values of a refill, by index in flat, when one is due (see
  -- refill_due).
  local rv, rn, rd = refill_due(argv, flat, now, hi, li, nl, ci, nc)
  local short = false
  local wf, wv, wi, set, at
  for k = ci + 1, ci + 2 * nc, 2 do
    local f = argv[k]
    local i, s3, params
    if f == f1 then i, s3, params = i1, s1, p1 else i = field(flat, f) end
    if not i then return 'limit_missing' end
    local amt = argv[k + 1]
    if amt ~= '0' then
      -- the balance and total follow the third separator
      local v = rv and rv[i] or flat[i]
      if not s3 then
        s3 = find(v, '|', find(v, '|', find(v, '|', 1, true) + 1, true) + 1, true)
        params = sub(v, 1, s3 - 1)
      end
      local tk, tc, t
      local rt = rn and rn[i]
      if rt then
        -- refilled on numbers: the balance is rt, the total as stored
        t, tc = rt, sub(v, rd[i] + 1)
      else
        local s4 = find(v, '|', s3 + 1, true)
        tk, tc = sub(v, s3 + 1, s4 - 1), sub(v, s4 + 1)
        t = tonumber(tk)
      end
      local a, c = tonumber(amt), tonumber(tc)
      local nt, ntc
      if a and t and c and a < B53 and a > -B53 and t < B53 and t > -B53 and c < B53 and c > -B53 then
        nt, ntc = t - a, c + a
        if nt <= -B53 or nt >= B53 or ntc <= -B53 or ntc >= B53 then nt = nil end
      end
      local nv
      if nt then
        if a > 0 and t < a then short = true end -- a positive amount not covered
        nv = format('%s|%d|%d', params, nt, ntc)
      else
        tk = tk or format('%d', t)
        if byte(amt, 1) ~= 45 and icmp(tk, amt) < 0 then short = true end
        nv = params .. '|' .. isub(tk, amt) .. '|' .. iadd(tc, amt)
      end
      if rn then
        -- written here: not again as the refill's value
        rn[i], rv[i] = nil, nil
      end
      if not wf then
        wf, wv, wi = f, nv, i
      else
        if not set then set, at = {}, {} end
        set[#set + 1] = f
        set[#set + 1] = nv
        at[#at + 1] = i
      end
    end
  end
  if short then return 'app_limit_exhausted' end
  if rv then
    -- the refill also writes the header and every limit the amounts did
    -- not (each field once)
    if not set then set, at = {}, {} end
    for i, v in pairs(rv) do
      set[#set + 1] = flat[i - 1]
      set[#set + 1] = v
      at[#at + 1] = i
    end
    for i, t in pairs(rn) do
      local v = flat[i]
      set[#set + 1] = flat[i - 1]
      set[#set + 1] = sub(v, 1, find(v, '|', find(v, '|', find(v, '|', 1, true) + 1, true) + 1, true)) .. format('%d', t) .. sub(v, rd[i])
      at[#at + 1] = i
    end
  end
  return '', wf, wv, wi, set, at
end

-- check_small is check for the common request, on numbers, with no
-- table when no refill is due: one or two resolved limits, each with a
-- positive amount (the amounts in the limits' order, as the client sends
-- them), on an item of the header, exactly those limits and perhaps an
-- incarnation (which a consume neither reads nor writes), every value
-- in the exact range of numbers. It returns what check returns, or nil
-- for any other request or item, or anything unusual (an expiry time, a
-- limit missing or changed, a value out of range), which check then
-- decides: both apply the same rules (store.RefillDue) and write the same
-- values.
local function check_small(argv, flat, now, li, nl, ci, nc)
  local n = #flat
  if nc ~= nl or nl > 2 or n < 2 * nl + 2 or n > 2 * nl + 4 then return nil end
  -- the header, and the incarnation (field i, which a consume neither
  -- reads nor writes) when the item has one
  local hi, inc
  for i = 1, n, 2 do
    local f = flat[i]
    if f == 'h' then hi = i + 1 elseif f == 'i' then inc = true end
  end
  if not hi or n ~= 2 * nl + (inc and 4 or 2) then return nil end
  local h = flat[hi]
  -- now on numbers, parsed once (at most 15 digits: exact); the requests
  -- of one millisecond share it
  local nown = last_nown
  if now ~= last_now then
    nown = num(now)
    last_now, last_nown = now, nown
  end
  if not nown then return nil end
  -- the header's refill time, expiry time (ms; false for none) and text
  -- from its first separator on: as a consume wrote it lately, or parsed
  local rfn, exp, tail = hdr_rf[h], hdr_exp[h], hdr_tail[h]
  if not rfn then
    local bar = find(h, '|', 1, true)
    local sep2 = bar and find(h, '|', bar + 1, true)
    -- h is rf|sc|cas|ttl|par: an expiry time (s) on numbers; a time too
    -- long to compare so is check_any's
    local sep3 = sep2 and find(h, '|', sep2 + 1, true)
    local sep4 = sep3 and find(h, '|', sep3 + 1, true)
    if not sep4 or sep4 == sep3 + 1 then return nil end
    exp = false
    if sep4 ~= sep3 + 2 or byte(h, sep3 + 1) ~= 48 then -- not '0'
      if sep4 - sep3 > 13 then return nil end
      local e = tonumber(sub(h, sep3 + 1, sep4 - 1))
      if not e then return nil end
      exp = e * 1000
    end
    rfn, tail = num(sub(h, 1, bar - 1)), sub(h, bar)
    if not rfn then return nil end
  end
  -- an expiry time not passed at now; an expired item is check_any's
  if exp and (#now > 15 or exp <= nown) then return nil end
  local after = nown > rfn
  -- limit j: field, index in flat, parameters, amount, balance, total,
  -- and its balance refilled to now (when now is after rf)
  local f1, i1, p1, a1, t1, c1, r1
  local f2, i2, p2, a2, t2, c2, r2
  local due = false
  for j = 1, nl do
    local f, p = argv[li + 2 * j - 1], argv[li + 2 * j]
    if argv[ci + 2 * j - 1] ~= f then return nil end
    local a = amount_of(argv[ci + 2 * j])
    if not a or a <= 0 then return nil end
    local i = field(flat, f)
    if not i then return nil end
    local v, m = flat[i], #p
    if byte(v, m + 1) ~= 124 or find(v, p, 1, true) ~= 1 then return nil end
    -- the balance and total: as a consume wrote them lately, or parsed
    local t, c = val_tk[v], val_tc[v]
    if not t then
      local d = find(v, '|', m + 2, true)
      if not d then return nil end
      t, c = num(sub(v, m + 2, d - 1)), num(sub(v, d + 1))
    end
    local cp, ra, rp = params_of(p)
    if not (t and c and cp and ra and rp) then return nil end
    -- refilled once: for whether it may be full (at its capacity, or
    -- refilled to it by now) and, when a refill is due, as its balance.
    -- A balance below the capacity whose refill surely reaches it, the
    -- time since rf times the refill amount covering the shortfall times
    -- the period (both products exact), is the capacity: what refill_n
    -- returns, without its divisions. A limit that refills within a
    -- millisecond (2^30 a minute) is full again on nearly every request.
    local r
    if after then
      local x, y = (nown - rfn) * ra, (cp - t) * rp
      if t < cp and ra > 0 and rp > 0 and x < B53 and y < B53 and x >= y then
        r = cp
      else
        r = refill_n(t, rfn, nown, cp, ra, rp)
        if r == nil then return nil end
      end
      if t >= cp or r >= cp then due = true end
    end
    if j == 1 then
      f1, i1, p1, a1, t1, c1, r1 = f, i, p, a, t, c, r
    else
      if i == i1 then return nil end -- one field named twice
      f2, i2, p2, a2, t2, c2, r2 = f, i, p, a, t, c, r
    end
  end
  if due then
    -- every limit of the item refilled to now first
    t1, t2 = r1, r2
  end
  local n1, s1 = t1 - a1, c1 + a1
  if n1 <= -B53 or s1 >= B53 then return nil end
  local short = t1 < a1
  local v2, n2, s2
  if f2 then
    n2, s2 = t2 - a2, c2 + a2
    if n2 <= -B53 or s2 >= B53 then return nil end
    short = short or t2 < a2
    v2 = format('%s|%d|%d', p2, n2, s2)
  end
  if short then return 'app_limit_exhausted' end
  local v1 = format('%s|%d|%d', p1, n1, s1)
  remember_value(v1, n1, s1)
  if f2 then remember_value(v2, n2, s2) end
  if not due then
    if rfn ~= hdr_rf[h] then remember_header(h, rfn, exp, tail) end
    if not f2 then return '', f1, v1, i1 end
    return '', f1, v1, i1, {f2, v2}, {i2}
  end
  local hv = now .. tail
  remember_header(hv, nown, exp, tail)
  if not f2 then return '', f1, v1, i1, {'h', hv}, {hi} end
  return '', f1, v1, i1, {f2, v2, 'h', hv}, {i2, hi}
end

-- check decides a request: check_small when it can, else check_any.
local function check(argv, flat, now, li, nl, ci, nc)
  local why, wf, wv, wi, set, at = check_small(argv, flat, now, li, nl, ci, nc)
  if why == nil then return check_any(argv, flat, now, li, nl, ci, nc) end
  return why, wf, wv, wi, set, at
end

-- take writes the fields check returned to key (one HSET) and into flat.
local function take(key, flat, wf, wv, wi, set, at)
  if not wf then return end
  flat[wi] = wv
  if not set then
    redis.call('HSET', key, wf, wv)
    return
  end
  for j = 1, #at do flat[at[j]] = set[2 * j] end
  redis.call('HSET', key, wf, wv, unpack(set))
end

-- item_lines returns pre followed by the lines of item flat: the number
-- of its lines (0 when missing), then its fields and values, one a line;
-- for an item of one or two limits (and an incarnation) in one
-- concatenation (one new string).
local function item_lines(pre, flat)
  local n = #flat
  if n == 4 then
    return pre .. '4\n' .. flat[1] .. '\n' .. flat[2] .. '\n' .. flat[3] .. '\n' .. flat[4]
  elseif n == 6 then
    return pre .. '6\n' .. flat[1] .. '\n' .. flat[2] .. '\n' .. flat[3] .. '\n' .. flat[4] .. '\n' .. flat[5] .. '\n' .. flat[6]
  elseif n == 8 then
    return pre .. '8\n' .. flat[1] .. '\n' .. flat[2] .. '\n' .. flat[3] .. '\n' .. flat[4] .. '\n' .. flat[5] .. '\n' .. flat[6] .. '\n' .. flat[7] .. '\n' .. flat[8]
  elseif n == 0 then
    return pre .. '0'
  end
  return pre .. decimal(n) .. '\n' .. table.concat(flat, '\n')
end

-- applied_head holds the first three lines of the reply of an applied
-- request (see reply) on an item of n lines, by n, for the common items:
-- constants, so that such a request adds two elements fewer to the reply.
local applied_head = {[4] = '1\n\n4', [6] = '1\n\n6', [8] = '1\n\n8', [10] = '1\n\n10'}

-- reply appends to out (lines, joined by newlines) the reply of one
-- request: "1" when it was applied, else "0"; the reason it could not
-- take its amounts ('' when it could); then the item's lines (see
-- item_lines). Each line is an element of its own, so that the request
-- makes no new string: the call's one concatenation copies them.
local function reply(out, applied, why, flat)
  local k, n = #out, #flat
  local head = applied and why == '' and applied_head[n]
  if head then
    -- the first three lines of the common reply in one constant element
    out[k + 1] = head
    for i = 1, n do out[k + 1 + i] = flat[i] end
    return
  end
  out[k + 1], out[k + 2], out[k + 3] = applied and '1' or '0', why, decimal(n)
  for i = 1, n do out[k + 3 + i] = flat[i] end
end
