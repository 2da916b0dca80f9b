--[[
  Appends a domain event unless an event with its id was appended within the
  dedupe window: an actor message handled twice stores its events once.

  KEYS[1]  the event stream
  KEYS[2]  the event id's marker key
  ARGV[1]  the dedupe window (ms)
  ARGV[2]  the stream's approximate maximum length
  ARGV[3]  the event (JSON)

  Returns 1 when appended, 0 when the id was appended already.
]]
if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', tonumber(ARGV[1])) then
  return 0
end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', tonumber(ARGV[2]), '*', 'e', ARGV[3])
return 1
