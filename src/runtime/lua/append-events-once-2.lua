--[[
  Appends a batch of domain events, each unless an event with its id was
  appended within the dedupe window: an actor message handled twice stores
  its events once. The ids appended are kept in a sorted set (score: when),
  so a batch costs one look-up and one insert however many events it holds.

  KEYS[1]  the event stream
  KEYS[2]  the stream's appended ids (sorted set, `<stream>:seen`)
  ARGV[1]  now (epoch ms)
  ARGV[2]  ids appended before this are dropped from the set (epoch ms); 0 = not this time
  ARGV[3]  the stream's approximate maximum length
  ARGV[4…] the events: id, event (JSON), id, event, …

  Marker keys `<stream>:seen:<id>` (what versions before the set wrote, one
  per event, expiring after the window) count as appended too: an upgrade
  never appends an event twice. They share the stream's hash tag, so its slot.

  Returns the number of events appended.
]]
local now = tonumber(ARGV[1])
local trimBefore = tonumber(ARGV[2])
if trimBefore > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. trimBefore)
end

local ids, markers, seen = {}, {}, {}
for i = 4, #ARGV, 2 do
  ids[#ids + 1] = ARGV[i]
  markers[#markers + 1] = KEYS[1] .. ':seen:' .. ARGV[i]
end
if #ids == 0 then
  return 0
end

local scores = redis.call('ZMSCORE', KEYS[2], unpack(ids))
for i, score in ipairs(scores) do
  if score then seen[ids[i]] = true end
end
-- Legacy markers are rare (only for the window after an upgrade): one EXISTS for the batch, one per id only when some exist.
if redis.call('EXISTS', unpack(markers)) > 0 then
  for i, marker in ipairs(markers) do
    if redis.call('EXISTS', marker) == 1 then seen[ids[i]] = true end
  end
end

local added = {}
local maxLength = tonumber(ARGV[3])
for i = 4, #ARGV, 2 do
  local id = ARGV[i]
  -- A batch that holds one id twice appends it once.
  if not seen[id] then
    seen[id] = true
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', maxLength, '*', 'e', ARGV[i + 1])
    added[#added + 1] = now
    added[#added + 1] = id
  end
end
if #added > 0 then
  redis.call('ZADD', KEYS[2], unpack(added))
end
return #added / 2
