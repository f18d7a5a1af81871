-- Appends an audit event. KEYS[1]: the entity's log, a sorted set whose
-- members (all of score 0) are "<event id>|<expires, epoch ms>|<JSON>", so
-- that lexicographic order is time order. ARGV: member, the event's time
-- (epoch ms), the log's lifetime (ms). Events expired at the event's time
-- are dropped from the oldest end.
redis.call('ZADD', KEYS[1], 0, ARGV[1])
local now = ARGV[2]
while true do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
  if not oldest then break end
  local a = string.find(oldest, '|', 1, true)
  local b = string.find(oldest, '|', a + 1, true)
  if icmp(string.sub(oldest, a + 1, b - 1), now) > 0 then break end
  redis.call('ZREM', KEYS[1], oldest)
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
