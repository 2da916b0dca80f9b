--[[
  Appends a batch of domain events as one stream entry: a tick's events cost
  one XADD however many they are. With `once`, each event is left out when
  an event with its id was appended within the dedupe window (an actor
  message handled twice stores its events once): the ids appended are kept
  in a sorted set (score: when), so a batch costs one look-up and one insert
  however many events it holds.

  KEYS[1]  the event stream
  KEYS[2]  the stream's appended ids (sorted set, `<stream>:seen`)
  KEYS[3]  the events appended to the stream so far (counter, `<stream>:appended`)
  ARGV[1]  now (epoch ms)
  ARGV[2]  ids appended before this are dropped from the set (epoch ms); 0 = not this time
  ARGV[3]  the stream's approximate maximum length, in entries
  ARGV[4]  1 = once by id, 0 = every event as given
  ARGV[5]  1 = the events as one entry; 0 = an entry each, as versions before
           appended them (for a rolling upgrade from those: their readers
           read only such entries)
  ARGV[6…] the events: id, event (JSON), id, event, …

  The entry's fields: `es`, the events as a JSON array, in order; `n`, how
  many; `c`, the counter after them (the events the stream was ever given up
  to this entry), from which the events between two entries follow without
  reading those between. An entry of one event as versions before wrote it
  holds it in the field `e`, with `n` and `c` here (none in theirs).

  Marker keys `<stream>:seen:<id>` (what versions before the set wrote, one
  per event, expiring after the window) count as appended too: an upgrade
  never appends an event twice. They share the stream's hash tag, so its slot.

  Returns the number of events appended.
]]
local now = tonumber(ARGV[1])
local trimBefore = tonumber(ARGV[2])
local once = ARGV[4] == '1'
if once and trimBefore > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. trimBefore)
end

local ids, markers, seen = {}, {}, {}
for i = 6, #ARGV, 2 do
  ids[#ids + 1] = ARGV[i]
  markers[#markers + 1] = KEYS[1] .. ':seen:' .. ARGV[i]
end
if #ids == 0 then
  return 0
end

if once then
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
end

local added, events = {}, {}
for i = 6, #ARGV, 2 do
  local id = ARGV[i]
  -- With `once`, a batch that holds one id twice appends it once.
  if not (once and seen[id]) then
    seen[id] = true
    events[#events + 1] = ARGV[i + 1]
    added[#added + 1] = now
    added[#added + 1] = id
  end
end
if #events == 0 then
  return 0
end
local count = redis.call('INCRBY', KEYS[3], #events)
local maxLength = tonumber(ARGV[3])
if ARGV[5] == '1' then
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', maxLength, '*',
    'es', '[' .. table.concat(events, ',') .. ']', 'n', #events, 'c', count)
else
  for i, event in ipairs(events) do
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', maxLength, '*', 'e', event, 'n', 1, 'c', count - #events + i)
  end
end
if once then
  redis.call('ZADD', KEYS[2], unpack(added))
end
return #events
