--[[
  Moves an entry whose handler kept failing to the dead-letter stream,
  with its error, in the same step as acknowledging it.

  KEYS[1]  the shard stream
  KEYS[2]  the actor type's dead-letter stream
  ARGV[1]  the consumer group
  ARGV[2]  the entry id
  ARGV[3]  the envelope (JSON)
  ARGV[4]  the last error
  ARGV[5]  deliveries made
  ARGV[6]  when it failed (ISO 8601)

  Returns the dead-letter entry id.
]]
local id = redis.call('XADD', KEYS[2], '*', 'e', ARGV[3], 'error', ARGV[4], 'deliveries', ARGV[5], 'failedAt', ARGV[6])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return id
