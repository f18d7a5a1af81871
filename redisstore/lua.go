package redisstore

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The Lua code of the store runs as one Redis 7 function library, loaded
// once per server and called with FCALL: the integer library and the
// helpers are defined when the library loads, not on every call. Where the
// server has no functions (Redis 6, services that disable FUNCTION, or
// [Options.DisableFunctions]) each entry point runs as a script of its own
// with EVALSHA, which defines what it uses on every call.
//
// Every entry file (write.lua, consume.lua, ...) is the body of a function
// of (KEYS, ARGV): in the library it is registered as a function, in a
// script it is called with the script's KEYS and ARGV. The shared files
// (int.lua, buckets.lua, ...) define local functions only and never read
// KEYS or ARGV themselves.

//go:embed lua/*.lua
var luaFS embed.FS

// readLua returns the source of lua/name.lua.
func readLua(name string) string {
	src, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err) // embedded at build time
	}
	return string(src)
}

// script is one entry point of the Lua code.
type script struct {
	name string
	fn   string // the library's function: libraryName + "_" + name
	src  string // as a script: the shared files it uses, the entry, a call of it
	sha  string // of src
	// fnArg and shaArg are fn and sha boxed once, as command arguments,
	// so that a call does not box them again
	fnArg, shaArg any
}

// entryDef returns entry point name's file wrapped in a function.
func entryDef(name string) string {
	return "local function entry_" + name + "(KEYS, ARGV)\n" + readLua(name) + "\nend\n"
}

// buildLibrary returns the name and the source of the function library
// of entries (see newScripts), whose files read returns by name.
func buildLibrary(read func(name string) string, entries [][]string) (name, src string) {
	const lib = "@LIB@" // the library's name, known once its code is
	var body, reg strings.Builder
	seen := map[string]bool{}
	for _, e := range entries {
		for _, part := range e[1:] {
			if !seen[part] {
				seen[part] = true
				body.WriteString(read(part))
				body.WriteByte('\n')
			}
		}
	}
	body.WriteString("entries = {}\n")
	for _, e := range entries {
		body.WriteString("local function entry_" + e[0] + "(KEYS, ARGV)\n" + read(e[0]) + "\nend\n")
		body.WriteString("entries." + e[0] + " = entry_" + e[0] + "\n")
		reg.WriteString("redis.register_function('" + lib + "_" + e[0] + "', function(keys, args)\n" +
			"  if not entries then init() end\n  return entries." + e[0] + "(keys, args)\nend)\n")
	}
	// Redis 7.0 lets a library read no global but redis while it loads, so
	// the code is defined on its first call, once.
	code := "local entries\nlocal function init()\n" + body.String() + "end\n" + reg.String()
	sum := sha1.Sum([]byte(code))
	name = "zael_" + hex.EncodeToString(sum[:6])
	return name, "#!lua name=" + name + "\n" + strings.ReplaceAll(code, lib, name)
}

// library is the function library: every shared file once, every entry
// point, and the registrations. Its name holds a hash of its code, so
// that versions of the store on one server (a rolling deploy) each call
// their own functions.
var library struct {
	name, src string
}

// newScripts builds the scripts and the library from entries: an entry
// name and the shared files it uses, in the order they must load.
func newScripts(entries [][]string) map[string]*script {
	library.name, library.src = buildLibrary(readLua, entries)
	out := map[string]*script{}
	for _, e := range entries {
		var b strings.Builder
		for _, part := range e[1:] {
			b.WriteString(readLua(part))
			b.WriteByte('\n')
		}
		b.WriteString(entryDef(e[0]))
		b.WriteString("return entry_" + e[0] + "(KEYS, ARGV)\n")
		src := b.String()
		ssum := sha1.Sum([]byte(src))
		sc := &script{name: e[0], fn: library.name + "_" + e[0], src: src, sha: hex.EncodeToString(ssum[:])}
		sc.fnArg, sc.shaArg = sc.fn, sc.sha
		out[e[0]] = sc
	}
	return out
}

// luaSource returns the shared files parts, for tests that run their own
// code after them.
func luaSource(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(readLua(p))
		b.WriteByte('\n')
	}
	return b.String()
}

var scripts = newScripts([][]string{
	{"write", "int", "expired", "bucket", "buckets", "writeid"},
	{"consume", "int", "expired", "bucket", "consume_lib", "writeid"},
	{"consume_each", "int", "expired", "bucket", "consume_lib", "writeid"},
	{"delete_buckets", "int"},
	{"create_entity", "int"},
	{"delete_entity", "int"},
	{"put_config", "int"},
	{"delete_config", "int"},
	{"swap_config", "int"},
	{"audit", "int"},
	{"token_bucket", "int", "bucket", "allow_tb"},
	{"gcra", "int", "bucket", "allow_gcra"},
	{"topup", "int", "expired", "buckets"},
})

// The entry points.
var (
	scriptWrite        = scripts["write"]
	scriptConsume      = scripts["consume"]
	scriptConsumeEach  = scripts["consume_each"]
	scriptDeleteBucket = scripts["delete_buckets"]
	scriptCreateEntity = scripts["create_entity"]
	scriptDeleteAdmin  = scripts["delete_entity"]
	scriptPutConfig    = scripts["put_config"]
	scriptDelConfig    = scripts["delete_config"]
	scriptSwapConfig   = scripts["swap_config"]
	scriptAudit        = scripts["audit"]
	scriptTokenBucket  = scripts["token_bucket"]
	scriptGCRA         = scripts["gcra"]
	scriptTopUp        = scripts["topup"]
)

// How the store runs its Lua code (Store.mode).
const (
	modeFunctions int32 = iota // FCALL; the library is loaded when the server lacks it
	modeScripts                // EVALSHA; EVAL after NOSCRIPT
)

// reply selects how exec reads a reply.
type reply int

const (
	replyAny    reply = iota // *redis.Cmd: any reply
	replyInts                // *redis.IntSliceCmd: an array of integers
	replyString              // *redis.StringCmd: one string
)

// newCmd returns the command of args whose reply is read as kind says.
func newCmd(ctx context.Context, kind reply, args []any) redis.Cmder {
	switch kind {
	case replyInts:
		return redis.NewIntSliceCmd(ctx, args...)
	case replyString:
		return redis.NewStringCmd(ctx, args...)
	}
	return redis.NewCmd(ctx, args...)
}

// run executes sc on keys (all in one slot) and returns its reply (nil for
// a nil reply).
func (s *Store) run(ctx context.Context, sc *script, keys []string, args ...any) (any, error) {
	full := make([]any, 3+len(keys)+len(args))
	full[2] = len(keys)
	for i, k := range keys {
		full[3+i] = k
	}
	copy(full[3+len(keys):], args)
	cmd, err := s.exec(ctx, sc, full, replyAny)
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap(sc.name, err)
	}
	return cmd.(*redis.Cmd).Val(), nil
}

// exec runs sc with the command arguments full, whose first two elements
// it sets (command and function or script), and returns the command, its
// reply read as kind says. In function mode a server that lacks the
// library gets it (once, for every caller waiting on it) and the call is
// repeated; a server without functions turns the store to scripts for
// good. In script mode NOSCRIPT sends the script itself. The error is the
// server's or the connection's, unwrapped.
func (s *Store) exec(ctx context.Context, sc *script, full []any, kind reply) (redis.Cmder, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.mode.Load() == modeFunctions {
		full[0], full[1] = "fcall", sc.fnArg
		cmd := newCmd(ctx, kind, full)
		err := s.client.Process(ctx, cmd)
		switch {
		case err == nil || !redis.HasErrorPrefix(err, "Function not found") && !noFunctions(err):
			return cmd, err
		case !noFunctions(err): // the library is missing: load it, call again
			lerr := s.loadLibrary(ctx)
			if lerr == nil {
				cmd = newCmd(ctx, kind, full)
				return cmd, s.client.Process(ctx, cmd)
			}
			if !noFunctions(lerr) {
				return nil, lerr
			}
		}
		s.mode.Store(modeScripts)
	}
	full[0], full[1] = "evalsha", sc.shaArg
	cmd := newCmd(ctx, kind, full)
	err := s.client.Process(ctx, cmd)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		s.reloads.Add(1)
		full[0], full[1] = "eval", sc.src
		cmd = newCmd(ctx, kind, full)
		err = s.client.Process(ctx, cmd)
	}
	return cmd, err
}

// noFunctions reports whether err says that the server does not offer
// functions to this client: an unknown command (Redis 6, or a service
// that renamed or disabled FUNCTION or FCALL) or a command the user may
// not run.
func noFunctions(err error) bool {
	return redis.HasErrorPrefix(err, "unknown command") || redis.HasErrorPrefix(err, "NOPERM") ||
		redis.HasErrorPrefix(err, "unknown subcommand")
}

// loadLibrary loads the function library on the server, or on every
// master of a Cluster (every shard of a Ring). Callers that find it
// missing at the same time share one load; a library of the same name
// already there is the same code.
func (s *Store) loadLibrary(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx) // shared by every waiting caller; go-redis's timeouts bound it
	_, err, _ := s.loads.Do("", func() (any, error) {
		s.reloads.Add(1)
		load := func(ctx context.Context, c *redis.Client) error {
			err := c.FunctionLoad(ctx, library.src).Err()
			if err != nil && redis.HasErrorPrefix(err, "Library '"+library.name+"' already exists") {
				return nil
			}
			return err
		}
		switch c := s.client.(type) {
		case *redis.ClusterClient:
			return nil, c.ForEachMaster(ctx, load)
		case *redis.Ring:
			return nil, c.ForEachShard(ctx, load)
		case *redis.Client:
			return nil, load(ctx, c)
		}
		err := s.client.FunctionLoad(ctx, library.src).Err()
		if err != nil && redis.HasErrorPrefix(err, "Library '"+library.name+"' already exists") {
			err = nil
		}
		return nil, err
	})
	return err
}

// UsesFunctions reports whether the store calls its Lua code as Redis
// functions (FCALL) rather than scripts (EVALSHA): true until the server
// shows it has no functions, or never with [Options.DisableFunctions].
func (s *Store) UsesFunctions() bool { return s.mode.Load() == modeFunctions }
