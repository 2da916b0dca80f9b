--[[
  Sends an actor message whose id was derived from the message that emitted
  it, unless that id was sent within the dedupe window: a redelivered
  handler's sends and timers are not queued a second time.

  KEYS[1]  the id's marker key
  KEYS[2]  the shard stream
  KEYS[3]  the shard's timer sorted set
  ARGV[1]  the dedupe window (ms)
  ARGV[2]  the envelope (JSON)
  ARGV[3]  when it is due (epoch ms); 0 = now

  Returns 1 when queued, 0 when the id was sent already.
]]
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', tonumber(ARGV[1])) then
  return 0
end
local due = tonumber(ARGV[3])
if due > 0 then
  redis.call('ZADD', KEYS[3], due, ARGV[2])
else
  redis.call('XADD', KEYS[2], '*', 'e', ARGV[2])
end
return 1
