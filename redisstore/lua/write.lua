-- WriteBuckets: KEYS are the bucket items, one write each. Every write's
-- condition is checked before anything is written, so the writes apply
-- all or none. Returns {1} or {0, index of the failed write}.

local writes = {}
for w = 1, #KEYS do
  local x = {key = KEYS[w], kind = nxt(), now = nxt(), ttl = nxt(), ttlabs = nxt(), ttlrel = nxt(), limits = {}}
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
  writes[w] = x
end

-- check returns whether x's condition holds.
local function check(x)
  local key = x.key
  local exists = redis.call('EXISTS', key) == 1
  if x.kind == 'c' then return not exists end
  if not exists then return false end
  if x.kind == 'n' then
    if redis.call('HGET', key, 'rf') ~= x.rf then return false end
    for _, l in ipairs(x.limits) do
      local present = has_limit(key, l.name)
      if l.init then
        if present then return false end
      else
        if not present then return false end
        local floor = isub(l.consumed, l.refill)
        if icmp(floor, '0') > 0 and icmp(get(key, 'tk', l.name), floor) < 0 then return false end
      end
    end
  elseif x.kind == 'r' then
    for _, l in ipairs(x.limits) do
      if has_limit(key, l.name) then
        if icmp(get(key, 'tk', l.name), l.consumed) < 0 then return false end
      elseif not l.init then
        return false
      end
    end
  end
  return true
end

for w, x in ipairs(writes) do
  if not check(x) then return {0, w} end
end

-- create_from_init adds limit l, absent from the item, from its initial
-- state less what the write consumes.
local function create_from_init(key, l, consumed)
  set_limit(key, l.name, isub(l.init.tk, consumed), consumed, l.init.cp, l.init.ra, l.init.rp)
end

for _, x in ipairs(writes) do
  local key, k = x.key, x.kind
  if k == 'c' then
    redis.call('HSET', key, 'rf', x.now, 'sc', x.sc, 'cas', x.cas, 'par', x.par, 'ttl', '0')
    for _, l in ipairs(x.limits) do
      if not has_limit(key, l.name) then set_limit(key, l.name, l.tk, l.tc, l.cp, l.ra, l.rp) end
    end
    if x.ttl == 's' then apply_ttl(key, 's', x.ttlabs, x.ttlrel) end
  elseif k == 'n' then
    for _, l in ipairs(x.limits) do
      if l.init then
        create_from_init(key, l, l.consumed)
      else
        local tk = iadd(get(key, 'tk', l.name), isub(l.refill, l.consumed))
        local tc = iadd(get(key, 'tc', l.name) or '0', l.consumed)
        redis.call('HSET', key, field('tk', l.name), tk, field('tc', l.name), tc)
        if l.params then
          redis.call('HSET', key, field('cp', l.name), l.params.cp, field('ra', l.name), l.params.ra,
            field('rp', l.name), l.params.rp)
        end
      end
    end
    redis.call('HSET', key, 'rf', x.now)
    apply_ttl(key, x.ttl, x.ttlabs, x.ttlrel)
    if x.refresh == '1' then redis.call('HSET', key, 'cas', x.cas, 'par', x.par) end
  elseif k == 'r' then
    for _, l in ipairs(x.limits) do
      if has_limit(key, l.name) then
        redis.call('HSET', key, field('tk', l.name), isub(get(key, 'tk', l.name), l.consumed),
          field('tc', l.name), iadd(get(key, 'tc', l.name) or '0', l.consumed))
      else
        create_from_init(key, l, l.consumed)
      end
    end
  elseif k == 'a' then
    for _, l in ipairs(x.limits) do
      -- a limit removed from the item meanwhile has nothing to adjust
      if has_limit(key, l.name) then
        local tk, cp = get(key, 'tk', l.name), get(key, 'cp', l.name)
        if icmp(l.consumed, '0') >= 0 then
          tk = isub(tk, l.consumed)
        elseif icmp(tk, cp) < 0 then
          -- a refund never lifts the balance above the capacity
          tk = imin(isub(tk, l.consumed), cp)
        end
        redis.call('HSET', key, field('tk', l.name), tk,
          field('tc', l.name), iadd(get(key, 'tc', l.name) or '0', l.consumed))
      end
    end
  elseif k == 's' then
    for _, l in ipairs(x.limits) do
      if not has_limit(key, l.name) then set_limit(key, l.name, l.init.tk, '0', l.init.cp, l.init.ra, l.init.rp) end
    end
    apply_ttl(key, x.ttl, x.ttlabs, x.ttlrel)
    for _, name in ipairs(x.remove) do del_limit(key, name) end
  else -- 'x': reset every limit to its capacity
    for _, name in ipairs(limit_names(key)) do
      redis.call('HSET', key, field('tk', name), get(key, 'cp', name))
    end
    redis.call('HSET', key, 'rf', x.now)
  end
end
return {1}
