-- Store.Allow with GCRA (see allow_gcra.lua) on each of KEYS, one after
-- the other, with five ARGV each: now, capacity, refill amount, refill
-- period, tokens requested. Returns three integers per key.
local out = {}
for r = 1, #KEYS do
  local a, o = 5 * (r - 1), 3 * (r - 1)
  out[o + 1], out[o + 2], out[o + 3] = allow_gcra(KEYS[r], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5])
end
return out
