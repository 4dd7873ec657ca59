-- Run once in a new Lua state, after the Rust side has put the libraries
-- (string, table, math, cjson, bit, redis, the base library and debug) in
-- the globals. It leaves the globals Redis 7 leaves a script and protects
-- them as Redis's patched Lua does with read-only tables:
--   * a script runs with an environment of its own that reads through to
--     the globals and refuses any assignment ("Attempt to modify a readonly
--     table"); reading a global nobody defined is an error too ("Script
--     attempted to access nonexistent global variable");
--   * the library tables a script sees are read-only views of the real
--     ones; setmetatable and rawset refuse the protected tables;
--   * pcall/xpcall cannot catch SCRIPT KILL.
-- It returns the functions the Rust side calls: the error handler, the
-- environment scripts run in, and `run`, which calls a script under xpcall.
local internal = ...
local raw_call, raw_pcall_cmd, killed = internal.raising_call, internal.call, internal.killed
local getinfo = debug.getinfo
local G = _G
local raw_setmetatable, raw_rawset, raw_pcall, raw_xpcall = setmetatable, rawset, pcall, xpcall
local raw_type, raw_error = type, error
local select, unpack, tostring, next = select, unpack, tostring, next

local allowed = {
  string = true, cjson = true, bit = true, cmsgpack = true, math = true, table = true,
  struct = true, redis = true, xpcall = true, tostring = true, getfenv = true,
  setmetatable = true, next = true, assert = true, tonumber = true, rawequal = true,
  collectgarbage = true, getmetatable = true, rawset = true, pcall = true, coroutine = true,
  type = true, _G = true, select = true, unpack = true, gcinfo = true, pairs = true,
  rawget = true, loadstring = true, ipairs = true, _VERSION = true, setfenv = true,
  load = true, error = true, newproxy = true,
}

local protected = raw_setmetatable({}, { __mode = "k" })
local function readonly() raw_error("Attempt to modify a readonly table", 2) end
local function view(t)
  local meta = { __index = t, __newindex = readonly }
  local v = raw_setmetatable({}, meta)
  meta.__metatable = v
  protected[v] = true
  return v
end

-- redis.call raises a command's error (a table {err = "CODE message"});
-- redis.pcall returns it. Both are bound to the run by the Rust side.
local redis = G.redis
redis.call = raw_call
redis.pcall = function(...)
  local _, reply = raw_pcall_cmd(...)
  return reply
end

-- A killed script stops even inside pcall.
local function after_pcall(ok, ...)
  local k = killed()
  if k then raw_error(k, 0) end
  -- Redis 7's pcall gives a Redis error's text, not the table.
  if not ok and raw_type((...)) == "table" and raw_type((...).err) == "string" then
    return false, (...).err, select(2, ...)
  end
  return ok, ...
end
G.pcall = function(f, ...) return after_pcall(raw_pcall(f, ...)) end
G.xpcall = function(f, h) return after_pcall(raw_xpcall(f, h)) end

G.setmetatable = function(t, m)
  if protected[t] then raw_error("Attempt to modify a readonly table", 2) end
  return raw_setmetatable(t, m)
end
G.rawset = function(t, k, v)
  if protected[t] then raw_error("Attempt to modify a readonly table", 2) end
  return raw_rawset(t, k, v)
end

for name in next, G do
  if not allowed[name] then G[name] = nil end
end
for _, lib in ipairs({ "string", "math", "table", "coroutine", "cjson", "bit", "redis", "cmsgpack", "struct" }) do
  if raw_type(G[lib]) == "table" then G[lib] = view(G[lib]) end
end

-- The environment every script runs in.
local env_meta = { __index = G, __newindex = readonly }
local env = raw_setmetatable({}, env_meta)
env_meta.__metatable = view(env_meta)
protected[env] = true
G._G = env

-- loadstring exists but gives nothing, as in Redis 7.0 (code loaded at run
-- time would escape the protections above).
G.loadstring = function() return nil end
G.load = nil

raw_setmetatable(G, {
  __index = function(_, k)
    raw_error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
  __newindex = readonly,
  __metatable = view({}),
})
protected[G] = true

-- The error handler: a Redis error table as is, anything else as
-- "ERR <text>"; with the script's source and line (the first frame that is
-- neither C nor this file), as Redis's __redis__err__handler.
local here = getinfo(1, "S").source
local function handler(err)
  if raw_type(err) ~= "table" then
    err = { err = "ERR " .. tostring(err) }
  end
  for level = 2, 32 do
    local i = getinfo(level, "Sl")
    if not i then break end
    if i.what ~= "C" and i.what ~= "tail" and i.source ~= here then
      err.source = i.source
      err.line = i.currentline
      break
    end
  end
  return err
end

local function run(f, ...)
  return raw_xpcall(f, handler)
end

return env, run, handler
