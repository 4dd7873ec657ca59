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
for _, lib in ipairs({ "string", "math", "table", "coroutine", "cjson", "bit", "cmsgpack", "struct" }) do
  if raw_type(G[lib]) == "table" then G[lib] = view(G[lib]) end
end

-- FUNCTION LOAD runs a library's code with `redis` as the load API
-- (register_function, log); its functions later run with the full API.
local loading, pending = false, nil
local load_api = {}
for _, k in ipairs({ "log", "LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING",
                     "REDIS_VERSION", "REDIS_VERSION_NUM" }) do
  load_api[k] = redis[k]
end
local function register_error(msg) raw_error({ err = "ERR " .. msg }, 0) end
local known_flags = { ["no-writes"] = true, ["allow-oom"] = true, ["allow-stale"] = true,
                      ["no-cluster"] = true, ["allow-cross-slot-keys"] = true }
load_api.register_function = function(...)
  if not loading then
    register_error("redis.register_function can only be called on FUNCTION LOAD command")
  end
  local n = select("#", ...)
  if n < 1 or n > 2 then register_error("wrong number of arguments to redis.register_function") end
  local name, callback, flags, desc
  if n == 2 then
    name, callback = ...
    if raw_type(name) == "number" then name = tostring(name) end
    if raw_type(name) ~= "string" then register_error("first argument to redis.register_function must be a string") end
    if raw_type(callback) ~= "function" then register_error("second argument to redis.register_function must be a function") end
  else
    local args = ...
    if raw_type(args) ~= "table" then
      register_error("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).")
    end
    for k, v in next, args do
      if raw_type(k) ~= "string" then register_error("named argument key given to redis.register_function is not a string") end
      local key = k:lower()
      if key == "function_name" then
        if raw_type(v) ~= "string" then register_error("function_name argument given to redis.register_function must be a string") end
        name = v
      elseif key == "description" then
        if raw_type(v) ~= "string" then register_error("description argument given to redis.register_function must be a string") end
        desc = v
      elseif key == "callback" then
        if raw_type(v) ~= "function" then register_error("callback argument given to redis.register_function must be a function") end
        callback = v
      elseif key == "flags" then
        if raw_type(v) ~= "table" then register_error("flags argument to redis.register_function must be a table representing function flags") end
        flags = {}
        for _, f in ipairs(v) do
          if raw_type(f) ~= "string" or not known_flags[f] then register_error("unknown flag given") end
          flags[#flags + 1] = f
        end
      else
        register_error("unknown argument given to redis.register_function")
      end
    end
    if not name then register_error("redis.register_function must get a function name argument") end
    if not callback then register_error("redis.register_function must get a callback argument") end
  end
  if not name:match("^[%w_]+$") then
    register_error("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long")
  end
  for _, f in ipairs(pending) do
    if f.name:lower() == name:lower() then register_error("Function already exists in the library") end
  end
  pending[#pending + 1] = { name = name, callback = callback, flags = flags or {}, description = desc }
end
G.redis = view(redis)

-- The environment every script runs in. A function library's code runs
-- while `loading` with only the load API as globals (`redis` with
-- register_function and log), as in Redis; its functions run with all.
local function nonexistent(k)
  raw_error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 3)
end
local load_redis_meta = {
  __index = function(_, k)
    local v = load_api[k]
    if v == nil then nonexistent(k) end
    return v
  end,
  __newindex = readonly,
}
local load_redis = raw_setmetatable({}, load_redis_meta)
load_redis_meta.__metatable = view(load_redis_meta)
protected[load_redis] = true
local load_globals = { redis = load_redis }
local env_meta = { __newindex = readonly }
if internal.functions then
  env_meta.__index = function(_, k)
    if not loading then return G[k] end
    local v = load_globals[k]
    if v == nil then nonexistent(k) end
    return v
  end
else
  env_meta.__index = G
end
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

local api = { env = env }

-- An EVAL script, KEYS and ARGV being globals.
function api.run(f)
  return raw_xpcall(f, handler)
end

-- A function: f(KEYS, ARGV).
function api.call(f, keys, argv)
  return raw_xpcall(function() return f(keys, argv) end, handler)
end

-- A library's code: true and what it registered, or false and the error.
function api.load(chunk)
  loading, pending = true, {}
  local ok, err = raw_pcall(chunk)
  local registered = pending
  loading, pending = false, nil
  if not ok then
    if raw_type(err) == "table" then return false, tostring(err.err) end
    return false, "ERR " .. tostring(err)
  end
  return true, registered
end

return api
