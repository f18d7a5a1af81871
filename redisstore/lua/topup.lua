-- Tops up a prepaid balance once per id. KEYS[1]: the balance's bucket
-- item; KEYS[2]: the key of the top-up's id, in the item's slot. ARGV:
-- the limit's name, the amount (millitokens), now (epoch ms), the id's
-- lifetime (ms), the record kept with the id ("<call token>|<amount>"),
-- the ceiling of the balance (millitokens: the prepaid limit's capacity).
-- The id's key holds the record of the call that applied it: a resent call
-- (same record) answers 'applied', another with the same amount
-- 'duplicate', one with another amount 'conflict'. Nothing is
-- written unless the item holds the limit and the amount fits under its
-- ceiling ('missing', 'capacity'). The balance is the stored one: the
-- refill timestamp stays (the refill of a balance's bucket is negligible).
local seen = redis.call('GET', KEYS[2])
if seen then
  if seen == ARGV[5] then return 'applied' end
  if string.match(seen, '|(.*)$') ~= ARGV[2] then return 'conflict' end
  return 'duplicate'
end
local it = load(KEYS[1])
if not it or expired(it.h.ttl, ARGV[3]) then return 'missing' end
local l = it.l[ARGV[1]]
if not l then return 'missing' end
local tk = iadd(l.tk, ARGV[2])
if icmp(tk, ARGV[6]) > 0 then return 'capacity' end
l.tk = tk
touch(it, ARGV[1])
save(it)
redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[4])
return 'applied'
