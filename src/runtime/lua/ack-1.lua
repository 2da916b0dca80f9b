--[[
  Acknowledges handled entries and deletes them, so shard streams hold only
  work not yet done: one call for the entries of one stream whose handling
  ended in the same tick (several batches, concurrent handlers).

  KEYS[1]  the shard stream
  ARGV[1]  the consumer group
  ARGV[2…] the entry ids

  Returns the number of entries acknowledged (fewer when another consumer
  had already taken some over and acknowledged them).
]]
local acked = redis.call('XACK', KEYS[1], unpack(ARGV))
redis.call('XDEL', KEYS[1], unpack(ARGV, 2))
return acked
