//! Library functions that raise Lua errors as Redis's C functions do.
//!
//! The functions written in Rust answer `(true, results...)` or `(false,
//! error)`; [`raising`] wraps one in a C closure that returns the results
//! or raises the error value itself (a Redis error is the table
//! `{err = "CODE message"}`, which mlua cannot raise from a callback).
//! The wrapper must be a C function, not a Lua one: a script's
//! `return redis.call(...)` is a tail call, and a Lua callee would replace
//! the script's frame, losing the line the error reply names.

use std::os::raw::c_int;

use mlua::{ffi, Function, Lua};

/// `f` answering `(ok, ...)` as a function that returns `...` or raises.
pub(crate) fn raising(lua: &Lua, f: Function) -> mlua::Result<Function> {
    // SAFETY: the closure only pushes a C closure over the one argument
    // exec_raw put on the stack.
    unsafe {
        lua.exec_raw::<Function>(f, |state| {
            ffi::lua_pushcclosure(state, raise_on_failure, 1);
        })
    }
}

/// Calls upvalue 1 with the arguments; raises its second result when its
/// first is false, otherwise returns the results after the first.
unsafe extern "C-unwind" fn raise_on_failure(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: a Lua C function called by Lua with a valid state; only Lua
    // API calls, no Rust value with a destructor lives across them (an
    // error unwinds through this frame by longjmp).
    unsafe {
        let n = ffi::lua_gettop(state);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_insert(state, 1);
        ffi::lua_call(state, n, ffi::LUA_MULTRET);
        let results = ffi::lua_gettop(state);
        if results == 0 {
            return 0;
        }
        if ffi::lua_toboolean(state, 1) == 0 {
            ffi::lua_settop(state, 2);
            ffi::lua_error(state);
        }
        ffi::lua_remove(state, 1);
        results - 1
    }
}
