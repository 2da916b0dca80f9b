--[[
  Adds an actor message to its shard's timers, to be moved into the shard
  stream when due.

  KEYS[1]  the shard's timer sorted set (score = due time, epoch ms)
  KEYS[2]  the shard's lease
  ARGV[1]  when it is due (epoch ms)
  ARGV[2]  the envelope (JSON)

  Returns the node id holding the shard's lease when this timer is now the
  shard's earliest (the sender wakes that node), else 1.
]]
redis.call('ZADD', KEYS[1], tonumber(ARGV[1]), ARGV[2])
local head = redis.call('ZRANGE', KEYS[1], 0, 0)
if head[1] == ARGV[2] then
  local holder = redis.call('GET', KEYS[2])
  if holder then return holder end
end
return 1
