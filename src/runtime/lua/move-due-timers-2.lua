--[[
  Moves timers that are due into their shard stream. Range, append and
  remove happen in one script, so a timer is delivered exactly once even
  when two nodes poll the same shard.

  KEYS[1]  the shard's timer sorted set (score = due time, epoch ms)
  KEYS[2]  the shard stream
  ARGV[1]  now (epoch ms)
  ARGV[2]  the most timers to move in one call

  Returns the number of timers moved.
]]
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, envelope in ipairs(due) do
  redis.call('XADD', KEYS[2], '*', 'e', envelope)
  redis.call('ZREM', KEYS[1], envelope)
end
return #due
