--[[
  Moves timers that are due into their shard stream. Range, append and
  remove happen in one script, so a timer is delivered exactly once even
  when two nodes move the same shard's timers.

  KEYS[1]  the shard's timer sorted set (score = due time, epoch ms)
  KEYS[2]  the shard stream
  ARGV[1]  now (epoch ms)
  ARGV[2]  the most timers to move in one call

  Returns when the earliest timer left is due (epoch ms), or -1 when none is
  left: the shard's owner sets its wake-up to that time.
]]
local now = tonumber(ARGV[1])
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if head[2] == nil then return -1 end
if tonumber(head[2]) > now then return tonumber(head[2]) end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
for _, envelope in ipairs(due) do
  redis.call('XADD', KEYS[2], '*', 'e', envelope)
  redis.call('ZREM', KEYS[1], envelope)
end
head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if head[2] == nil then return -1 end
return tonumber(head[2])
