-- WriteBuckets: KEYS are the bucket items, one write each, then the hash
-- of the call's write identifier (ARGV[1], see writeid.lua); the writes'
-- arguments follow it. Every write's condition is
-- checked before anything is written, so the writes apply all or none.
-- Returns {1} or {0, index of the failed write}; {1}, writing nothing, for
-- a call resent after it applied.

local nk, idk = #KEYS - 1, KEYS[#KEYS]
local id = ARGV[1]

-- cursor over ARGV, after the write identifier
local argi = 1
local function nxt()
  argi = argi + 1
  return ARGV[argi]
end
local function nxtn()
  return tonumber(nxt())
end

local writes = {}
for w = 1, nk do
  local x = {key = KEYS[w], kind = nxt(), now = nxt(), ttl = nxt(), ttlabs = nxt(), ttlrel = nxt(), inc = nxt(), limits = {}}
  local k = x.kind
  if k == 'c' then
    x.sc, x.cas, x.par = nxt(), nxt(), nxt()
    for _ = 1, nxtn() do
      x.limits[#x.limits + 1] = {name = nxt(), tk = nxt(), tc = nxt(), cp = nxt(), ra = nxt(), rp = nxt()}
    end
  elseif k == 'n' then
    x.rf, x.refresh, x.cas, x.par = nxt(), nxt(), nxt(), nxt()
    for _ = 1, nxtn() do
      local l = {name = nxt(), consumed = nxt(), refill = nxt()}
      if nxt() == '1' then l.init = {tk = nxt(), cp = nxt(), ra = nxt(), rp = nxt()} end
      if nxt() == '1' then l.params = {cp = nxt(), ra = nxt(), rp = nxt()} end
      x.limits[#x.limits + 1] = l
    end
  elseif k == 'r' then
    for _ = 1, nxtn() do
      local l = {name = nxt(), consumed = nxt()}
      if nxt() == '1' then l.init = {tk = nxt(), cp = nxt(), ra = nxt(), rp = nxt()} end
      x.limits[#x.limits + 1] = l
    end
  elseif k == 'a' then
    for _ = 1, nxtn() do
      x.limits[#x.limits + 1] = {name = nxt(), consumed = nxt()}
    end
  elseif k == 's' then
    for _ = 1, nxtn() do
      x.limits[#x.limits + 1] = {name = nxt(), init = {tk = nxt(), cp = nxt(), ra = nxt(), rp = nxt()}}
    end
    x.remove = {}
    for _ = 1, nxtn() do x.remove[#x.remove + 1] = nxt() end
  elseif k ~= 'x' then
    return redis.error_reply('unknown write kind ' .. tostring(k))
  end
  x.item = load(x.key)
  writes[w] = x
end

-- limit_full reports whether limit s of an item last refilled at rf may
-- have refilled to its capacity by now (bucketmath.FullAtMs).
local function limit_full(s, rf, now)
  if icmp(s.tk, s.cp) >= 0 then return true end
  if icmp(s.ra, '0') <= 0 or icmp(s.rp, '0') <= 0 then return false end
  return icmp((bucket_call('refill', s.tk, rf, now, s.cp, s.ra, s.rp)), s.cp) >= 0
end

-- A retry takes from the stored balances without refilling, as a
-- speculative consume does, under the same rule: when a limit it takes a
-- positive amount from may be full by now, every limit of the item is
-- refilled to now first and rf set to now (store.RefillDue). An
-- adjustment's charge follows the same rule (store.ChargeRefillDue), so
-- that the cap of a later refill never absorbs it. Nothing is saved
-- unless every write's condition holds.
for _, x in ipairs(writes) do
  local it = x.item
  if (x.kind == 'r' or x.kind == 'a') and it and icmp(x.now, it.h.rf) > 0 then
    local due = false
    for _, l in ipairs(x.limits) do
      local s = it.l[l.name]
      if s and icmp(l.consumed, '0') > 0 and limit_full(s, it.h.rf, x.now) then
        due = true
        break
      end
    end
    if due then
      for name, s in pairs(it.l) do
        s.tk = (bucket_call('refill', s.tk, it.h.rf, x.now, s.cp, s.ra, s.rp))
        touch(it, name)
      end
      it.h.rf = x.now
      touch(it)
    end
  end
end

-- check returns whether x's condition holds.
local function check(x)
  local it = x.item
  if x.kind == 'c' then return it == nil end
  if not it then return false end
  -- a write computed from, or settling a lease of, one life of the item
  if (x.kind == 'n' or x.kind == 'r' or x.kind == 'a') and (it.inc or '0') ~= x.inc then return false end
  if x.kind == 'n' then
    if it.h.rf ~= x.rf then return false end
    for _, l in ipairs(x.limits) do
      local s = it.l[l.name]
      if l.init then
        if s then return false end
      else
        if not s then return false end
        local floor = isub(l.consumed, l.refill)
        if icmp(floor, '0') > 0 and icmp(s.tk, floor) < 0 then return false end
      end
    end
  elseif x.kind == 'r' then
    for _, l in ipairs(x.limits) do
      local s = it.l[l.name]
      if s then
        if icmp(s.tk, l.consumed) < 0 then return false end
      elseif not l.init then
        return false
      end
    end
  end
  return true
end

for w, x in ipairs(writes) do
  if not check(x) then
    if write_id_applied(idk, id) then return {1} end
    return {0, w}
  end
end
-- a call that applied before applies nothing again
if write_id_claim(idk, id) then return {1} end

-- from_init is limit l, absent from the item, created from its initial
-- state less what the write consumes.
local function from_init(l, consumed)
  return {tk = isub(l.init.tk, consumed), tc = consumed, cp = l.init.cp, ra = l.init.ra, rp = l.init.rp}
end

for _, x in ipairs(writes) do
  local it, k = x.item, x.kind
  if k == 'c' then
    it = {key = x.key, h = {rf = x.now, sc = x.sc, cas = x.cas, ttl = '0', par = x.par}, l = {}, set = {}, del = {}}
    if x.inc ~= '0' then it.inc, it.newinc = x.inc, true end
    touch(it)
    for _, l in ipairs(x.limits) do
      if not it.l[l.name] then
        it.l[l.name] = {tk = l.tk, tc = l.tc, cp = l.cp, ra = l.ra, rp = l.rp}
        touch(it, l.name)
      end
    end
    if x.ttl == 's' then apply_ttl(it, 's', x.ttlabs, x.ttlrel) end
  elseif k == 'n' then
    for _, l in ipairs(x.limits) do
      if l.init then
        it.l[l.name] = from_init(l, l.consumed)
      else
        local s = it.l[l.name]
        s.tk = iadd(s.tk, isub(l.refill, l.consumed))
        s.tc = iadd(s.tc, l.consumed)
        if l.params then s.cp, s.ra, s.rp = l.params.cp, l.params.ra, l.params.rp end
      end
      touch(it, l.name)
    end
    it.h.rf = x.now
    touch(it)
    apply_ttl(it, x.ttl, x.ttlabs, x.ttlrel)
    if x.refresh == '1' then it.h.cas, it.h.par = x.cas, x.par end
  elseif k == 'r' then
    for _, l in ipairs(x.limits) do
      local s = it.l[l.name]
      if s then
        s.tk, s.tc = isub(s.tk, l.consumed), iadd(s.tc, l.consumed)
      else
        it.l[l.name] = from_init(l, l.consumed)
      end
      touch(it, l.name)
    end
  elseif k == 'a' then
    for _, l in ipairs(x.limits) do
      -- a limit removed from the item meanwhile has nothing to adjust
      local s = it.l[l.name]
      if s then
        if icmp(l.consumed, '0') >= 0 then
          s.tk = isub(s.tk, l.consumed)
        elseif icmp(s.tk, s.cp) < 0 then
          -- a refund never lifts the balance above the capacity
          s.tk = imin(isub(s.tk, l.consumed), s.cp)
        end
        s.tc = iadd(s.tc, l.consumed)
        touch(it, l.name)
      end
    end
    -- 'e': a charge delays the time the item is full again, and so its
    -- expiry (recorded and real); an item without a TTL keeps none
    if x.ttl == 'e' and it.h.ttl ~= '0' then
      it.h.ttl = iadd(it.h.ttl, x.ttlabs)
      touch(it)
      local left = redis.call('PTTL', x.key)
      if left > 0 then it.pexpire = iadd(tostring(left), x.ttlrel) end
    end
  elseif k == 's' then
    for _, l in ipairs(x.limits) do
      if not it.l[l.name] then
        it.l[l.name] = {tk = l.init.tk, tc = '0', cp = l.init.cp, ra = l.init.ra, rp = l.init.rp}
        touch(it, l.name)
      end
    end
    apply_ttl(it, x.ttl, x.ttlabs, x.ttlrel)
    for _, name in ipairs(x.remove) do
      if it.l[name] then
        it.l[name] = nil
        it.del[name] = true
      end
    end
  else -- 'x': reset every limit to its capacity
    for name, s in pairs(it.l) do
      s.tk = s.cp
      touch(it, name)
    end
    it.h.rf = x.now
    touch(it)
  end
  save(it)
  if it.pexpire then redis.call('PEXPIRE', x.key, it.pexpire) end
  if it.persist then redis.call('PERSIST', x.key) end
end
return {1}
