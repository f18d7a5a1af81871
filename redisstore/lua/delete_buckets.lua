-- Deletes the bucket items of one (entity, resource): KEYS[1] is shard 0;
-- ARGV[1] is the key of shard 0 without its shard number. Returns how
-- many items were deleted.
local h = redis.call('HGET', KEYS[1], 'h')
local sc = 1
if h then sc = tonumber(string.match(h, '^[^|]*|([^|]*)|')) or 1 end
local n = 0
for shard = 0, math.max(sc, 1) - 1 do
  n = n + redis.call('DEL', ARGV[1] .. shard)
end
return n
