--[[
  Sends an actor message whose id was derived from the message that emitted
  it, unless that id was sent within the dedupe window: a redelivered
  handler's sends and timers are not queued a second time.

  KEYS[1]  the id's marker key
  KEYS[2]  the shard stream
  KEYS[3]  the shard's timer sorted set
  KEYS[4]  the shard's lease
  ARGV[1]  the dedupe window (ms)
  ARGV[2]  the envelope (JSON)
  ARGV[3]  when it is due (epoch ms); 0 = now

  Returns 0 when the id was sent already, else 1; or, for a timer that is now
  the shard's earliest, the node id holding the shard's lease: the sender
  wakes that node (its next timer moved closer), so no node polls the timers.
]]
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', tonumber(ARGV[1])) then
  return 0
end
local due = tonumber(ARGV[3])
if due > 0 then
  redis.call('ZADD', KEYS[3], due, ARGV[2])
  local head = redis.call('ZRANGE', KEYS[3], 0, 0)
  if head[1] == ARGV[2] then
    local holder = redis.call('GET', KEYS[4])
    if holder then return holder end
  end
else
  redis.call('XADD', KEYS[2], '*', 'e', ARGV[2])
end
return 1
