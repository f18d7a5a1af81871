-- Replaces the config KEYS[1] (one without index entries, such as the
-- system config) when it holds what was read. ARGV: the new config
-- (JSON), the config read ('' for none stored). Returns 1 when stored, 0
-- when it holds another value.
local cur = redis.call('GET', KEYS[1])
if not cur then cur = '' end
if cur ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
