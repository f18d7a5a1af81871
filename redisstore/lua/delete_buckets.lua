-- Deletes the bucket items of one (entity, resource): KEYS[1] is shard 0;
-- ARGV[1] is the key of shard 0 without its shard number. Returns how
-- many items were deleted.
local sc = tonumber(redis.call('HGET', KEYS[1], 'sc') or '1') or 1
local n = 0
for shard = 0, math.max(sc, 1) - 1 do
  n = n + redis.call('DEL', ARGV[1] .. shard)
end
return n
