--[[
  Acknowledges a handled entry and deletes it, so shard streams hold only
  work not yet done.

  KEYS[1]  the shard stream
  ARGV[1]  the consumer group
  ARGV[2]  the entry id

  Returns the number of entries acknowledged (0 when another consumer had
  already taken it over and acknowledged it).
]]
local acked = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return acked
