package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/redisserver"
)

// checkSmallLua runs check_small and check_any (consume_lib.lua) on one
// item and request: ARGV is the request as the consume script reads it
// (now, the limits, the amounts), then the number of the item's HGETALL
// entries and those entries. It returns "nil" when check_small declines,
// else both decisions (the reason and every field written, with its value
// and its index in the item, sorted), separated by " || ".
const checkSmallLua = `
local argv, flat = {}, {}
local na = tonumber(ARGV[1])
for i = 1, na do argv[i] = ARGV[1 + i] end
for i = 1, tonumber(ARGV[na + 2]) do flat[i] = ARGV[na + 2 + i] end
local now, li, nl, ci, nc = read_request(argv, 0)
local function norm(why, wf, wv, wi, set, at)
  local out = {}
  if wf then out[#out + 1] = wf .. '=' .. wv .. '@' .. wi end
  if set then
    for j = 1, #at do out[#out + 1] = set[2 * j - 1] .. '=' .. set[2 * j] .. '@' .. at[j] end
  end
  table.sort(out)
  return why .. ' ' .. table.concat(out, ' ')
end
local general = norm(check_any(argv, flat, now, li, nl, ci, nc))
local a = {check_small(argv, flat, now, li, nl, ci, nc)}
if a[1] == nil then return 'nil || ' .. general end
return norm(unpack(a, 1, 6)) .. ' || ' .. general
`

// stringsOnly makes every number inexact for the code loaded after it:
// only the exact integers of int.lua remain.
const stringsOnly = "local B53 = 0\nlocal function num() return nil end\n"

// TestCheckSmallAgreesWithCheck: on random items and requests of one or
// two limits (balances at, below, above and far below the capacity,
// refills of every size, now before, at and after rf, amounts that fit or
// not, values near 2^53, expiry times, fields in any order), check_any
// decides as it does on the exact integers alone (every number made
// inexact), and wherever check_small decides, it decides the same: the
// same reason, the same fields written with the same values. check_small
// must decide many of them (the common request), and decline some (the
// unusual ones).
func TestCheckSmallAgreesWithCheck(t *testing.T) {
	c := redisserver.Client(t)
	ctx := context.Background()
	src := luaSource("int", "expired", "bucket", "consume_lib") + checkSmallLua
	exact := luaSource("int") + stringsOnly + luaSource("expired", "bucket", "consume_lib") + checkSmallLua
	rng := rand.New(rand.NewPCG(48, 7))
	pick := func(v ...int64) int64 { return v[rng.IntN(len(v))] }
	decided, declined, refills := 0, 0, 0
	for n := range 3000 {
		nl := 1 + rng.IntN(2)
		names := []string{"l:rpm", "l:tpm"}[:nl]
		rf := int64(1_767_225_600_000) + rng.Int64N(1<<30)
		now := rf + pick(0, -3, 1, 7, 999, 60_000, 3_600_000, rng.Int64N(1<<20))
		ttl := "0"
		if rng.IntN(10) == 0 {
			ttl = strconv.FormatInt(now/1000+pick(-1, 0, 1, 100), 10)
		}
		flat := []string{"h", fmt.Sprintf("%d|1|0|%s|", rf, ttl)}
		var argv, amounts []string
		argv = append(argv, strconv.FormatInt(now, 10), strconv.Itoa(nl))
		for _, name := range names {
			cp := pick(1000, 100_000, 2_000_000_000, 1<<30*1000, 1<<52, 1<<53+2)
			ra := pick(cp, cp/2, 1, 0, 1000)
			rp := pick(60_000, 1000, 86_400_000, 0)
			tk := pick(cp, cp-1, cp-1000, cp/2, 0, -cp, cp+5, rng.Int64N(cp+1))
			tc := pick(0, 5_200_000, rng.Int64N(1<<40), 1<<53-1)
			params := fmt.Sprintf("%d|%d|%d", cp, ra, rp)
			flat = append(flat, name, fmt.Sprintf("%s|%d|%d", params, tk, tc))
			argv = append(argv, name, params)
			amounts = append(amounts, name, strconv.FormatInt(pick(1000, 500_000, 1, 0, -1000, cp, cp+1, tk, tk+1), 10))
		}
		if rng.IntN(20) == 0 { // a changed limit
			flat[3] = "7|7|7|7|7"
		}
		// fields in any order
		pairs := len(flat) / 2
		for i := pairs - 1; i > 0; i-- {
			j := rng.IntN(i + 1)
			flat[2*i], flat[2*j] = flat[2*j], flat[2*i]
			flat[2*i+1], flat[2*j+1] = flat[2*j+1], flat[2*i+1]
		}
		argv = append(argv, strconv.Itoa(nl))
		argv = append(argv, amounts...)
		args := []any{len(argv)}
		for _, a := range argv {
			args = append(args, a)
		}
		args = append(args, len(flat))
		for _, f := range flat {
			args = append(args, f)
		}
		got, err := c.Eval(ctx, src, nil, args...).Text()
		require.NoError(t, err, "case %d", n)
		small, general, ok := strings.Cut(got, " || ")
		require.True(t, ok, got)
		want, err := c.Eval(ctx, exact, nil, args...).Text()
		require.NoError(t, err, "case %d", n)
		_, wantGeneral, _ := strings.Cut(want, " || ")
		require.Equal(t, wantGeneral, general, "case %d, check_any against the exact integers: item %q, request %q", n, flat, argv)
		if small == "nil" {
			declined++
			continue
		}
		decided++
		require.Equal(t, general, small, "case %d: item %q, request %q", n, flat, argv)
		if strings.Contains(small, " h=") {
			refills++
		}
	}
	t.Logf("check_small decided %d, declined %d; %d refills", decided, declined, refills)
	require.Greater(t, decided, 500)
	require.Greater(t, declined, 100)
	require.Greater(t, refills, 100)
}

// TestCheckSmallWithIncarnation: an item that keeps an incarnation (field
// i, which the limiter's writes give every item they create) is the
// common item, and check_small decides it as check_any does: the same
// reason and the same fields written, the incarnation never among them;
// an item with another field besides, or with a limit the request does
// not name, is declined.
func TestCheckSmallWithIncarnation(t *testing.T) {
	c := redisserver.Client(t)
	ctx := context.Background()
	src := luaSource("int", "expired", "bucket", "consume_lib") + checkSmallLua
	rng := rand.New(rand.NewPCG(48, 8))
	pick := func(v ...int64) int64 { return v[rng.IntN(len(v))] }
	decided, declined, refills := 0, 0, 0
	for n := range 1000 {
		nl := 1 + rng.IntN(2)
		names := []string{"l:rpm", "l:tpm"}[:nl]
		rf := int64(1_767_225_600_000) + rng.Int64N(1<<30)
		now := rf + pick(0, -3, 1, 7, 999, 60_000, 3_600_000)
		ttl := "0"
		if rng.IntN(4) == 0 {
			ttl = strconv.FormatInt(now/1000+pick(-1, 0, 1, 100), 10)
		}
		flat := []string{"h", fmt.Sprintf("%d|1|0|%s|", rf, ttl), "i", strconv.FormatUint(rng.Uint64(), 10)}
		argv := []string{strconv.FormatInt(now, 10), strconv.Itoa(nl)}
		var amounts []string
		for _, name := range names {
			cp := pick(1000, 100_000, 2_000_000_000, 1<<30*1000)
			ra := pick(cp, cp/2, 1, 1000)
			rp := pick(60_000, 1000, 86_400_000)
			tk := pick(cp, cp-1, cp-1000, cp/2, 0, -cp, rng.Int64N(cp+1))
			tc := pick(0, 5_200_000, rng.Int64N(1<<40))
			params := fmt.Sprintf("%d|%d|%d", cp, ra, rp)
			flat = append(flat, name, fmt.Sprintf("%s|%d|%d", params, tk, tc))
			argv = append(argv, name, params)
			amounts = append(amounts, name, strconv.FormatInt(pick(1000, 500_000, 1, cp, cp+1, tk, tk+1), 10))
		}
		extra := rng.IntN(8)
		switch extra {
		case 0: // a limit the request does not name
			flat = append(flat, "l:rpd", "1000|1000|86400000|1000|0")
		case 1: // a field of a later version
			flat = append(flat, "x", "1")
		}
		pairs := len(flat) / 2
		for i := pairs - 1; i > 0; i-- {
			j := rng.IntN(i + 1)
			flat[2*i], flat[2*j] = flat[2*j], flat[2*i]
			flat[2*i+1], flat[2*j+1] = flat[2*j+1], flat[2*i+1]
		}
		argv = append(argv, strconv.Itoa(nl))
		argv = append(argv, amounts...)
		args := []any{len(argv)}
		for _, a := range argv {
			args = append(args, a)
		}
		args = append(args, len(flat))
		for _, f := range flat {
			args = append(args, f)
		}
		got, err := c.Eval(ctx, src, nil, args...).Text()
		require.NoError(t, err, "case %d", n)
		small, general, ok := strings.Cut(got, " || ")
		require.True(t, ok, got)
		require.NotContains(t, general, " i=", "case %d: check_any writes the incarnation", n)
		if small == "nil" {
			declined++
			continue
		}
		require.Greater(t, extra, 1, "case %d: check_small decided an item with another field: %q", n, flat)
		decided++
		require.Equal(t, general, small, "case %d: item %q, request %q", n, flat, argv)
		if strings.Contains(small, " h=") {
			refills++
		}
	}
	t.Logf("check_small decided %d, declined %d; %d refills", decided, declined, refills)
	require.Greater(t, decided, 400)
	require.Greater(t, declined, 150)
	require.Greater(t, refills, 50)
}

// checkSmallChainLua runs a chain of requests on one item, as the consume
// script would one after the other: ARGV is the first request and the
// item as in checkSmallLua, then the number of steps and, per step, its
// now, the index of a field another writer changes before it (0 for
// none) and that field's new value, and its amounts (one per limit).
// Each step runs check_any and check_small on the item as the steps
// before left it (check_any's writes applied), so that check_small finds
// the values and headers it wrote itself; it returns a line per step as
// checkSmallLua does.
const checkSmallChainLua = `
local argv, flat = {}, {}
local na = tonumber(ARGV[1])
for i = 1, na do argv[i] = ARGV[1 + i] end
local nf = tonumber(ARGV[na + 2])
for i = 1, nf do flat[i] = ARGV[na + 2 + i] end
local k = na + 3 + nf
local steps = tonumber(ARGV[k])
local now, li, nl, ci, nc = read_request(argv, 0)
local function norm(why, wf, wv, wi, set, at)
  local out = {}
  if wf then out[#out + 1] = wf .. '=' .. wv .. '@' .. wi end
  if set then
    for j = 1, #at do out[#out + 1] = set[2 * j - 1] .. '=' .. set[2 * j] .. '@' .. at[j] end
  end
  table.sort(out)
  return why .. ' ' .. table.concat(out, ' ')
end
local lines = {}
for s = 1, steps do
  argv[1] = ARGV[k + 1]
  local poke = tonumber(ARGV[k + 2])
  if poke > 0 then flat[poke] = ARGV[k + 3] end
  for j = 1, nc do argv[ci + 2 * j] = ARGV[k + 3 + j] end
  k = k + 3 + nc
  now = argv[1]
  local general = norm(check_any(argv, flat, now, li, nl, ci, nc))
  -- whether check_small finds every limit's value and the header kept
  local kept = hdr_rf[flat[2]] ~= nil
  for i = 6, #flat, 2 do kept = kept and val_tk[flat[i]] ~= nil end
  local a = {check_small(argv, flat, now, li, nl, ci, nc)}
  local mark = kept and 'kept ' or ''
  if a[1] == nil then
    lines[s] = mark .. 'nil || ' .. general
  else
    lines[s] = mark .. norm(unpack(a, 1, 6)) .. ' || ' .. general
  end
  local why, wf, wv, wi, set, at = check_any(argv, flat, now, li, nl, ci, nc)
  if why == '' and wf then
    flat[wi] = wv
    if set then
      for j = 1, #at do flat[at[j]] = set[2 * j] end
    end
  end
end
return table.concat(lines, '\n')
`

// TestCheckSmallChainAgreesWithCheck: check_small keeps the values and
// headers it wrote, parsed, for the next request on the item. On chains
// of requests on one item (refills due or not, amounts that fit or not,
// other writers changing a limit or the header between two requests, an
// expiry time that passes midway), every decision check_small makes is
// check_any's, and it decides most of them.
func TestCheckSmallChainAgreesWithCheck(t *testing.T) {
	c := redisserver.Client(t)
	ctx := context.Background()
	src := luaSource("int", "expired", "bucket", "consume_lib") + checkSmallChainLua
	rng := rand.New(rand.NewPCG(48, 9))
	pick := func(v ...int64) int64 { return v[rng.IntN(len(v))] }
	decided, declined, refills, pokes, kept := 0, 0, 0, 0, 0
	for n := range 200 {
		nl := 1 + rng.IntN(2)
		names := []string{"l:rpm", "l:tpm"}[:nl]
		rf := int64(1_767_225_600_000) + rng.Int64N(1<<30)
		now := rf + pick(0, 1, 999)
		ttl := "0"
		if rng.IntN(3) == 0 {
			ttl = strconv.FormatInt(now/1000+pick(1, 2, 100), 10)
		}
		flat := []string{"h", fmt.Sprintf("%d|1|0|%s|", rf, ttl), "i", "7"}
		argv := []string{strconv.FormatInt(now, 10), strconv.Itoa(nl)}
		var params []string
		var caps []int64
		for _, name := range names {
			cp := pick(100_000, 2_000_000_000, 1<<30*1000)
			ra := pick(cp, cp/2, 1000)
			rp := pick(60_000, 1000)
			p := fmt.Sprintf("%d|%d|%d", cp, ra, rp)
			params, caps = append(params, p), append(caps, cp)
			flat = append(flat, name, fmt.Sprintf("%s|%d|%d", p, pick(cp, cp/2, 0), pick(0, rng.Int64N(1<<40))))
			argv = append(argv, name, p)
		}
		argv = append(argv, strconv.Itoa(nl))
		for _, name := range names {
			argv = append(argv, name, "1000")
		}
		args := []any{len(argv)}
		for _, a := range argv {
			args = append(args, a)
		}
		args = append(args, len(flat))
		for _, f := range flat {
			args = append(args, f)
		}
		const steps = 40
		args = append(args, steps)
		for range steps {
			now += pick(0, 0, 1, 3, 999, 1500, 60_000)
			args = append(args, now)
			switch rng.IntN(12) {
			case 0: // another writer changes a limit's balance
				j := rng.IntN(nl)
				args = append(args, 6+2*j, fmt.Sprintf("%s|%d|%d", params[j], pick(caps[j], caps[j]/3, -5), rng.Int64N(1<<30)))
				pokes++
			case 1: // or the header: refill time, expiry
				args = append(args, 2, fmt.Sprintf("%d|1|0|%d|", now-pick(0, 5, 2000), now/1000+pick(0, 1, 3)))
				pokes++
			default:
				args = append(args, 0, "")
			}
			for j := range nl {
				args = append(args, pick(1000, 500_000, 1, caps[j]/2, caps[j]+1))
			}
		}
		got, err := c.Eval(ctx, src, nil, args...).Text()
		require.NoError(t, err, "chain %d", n)
		for s, line := range strings.Split(got, "\n") {
			line, hit := strings.CutPrefix(line, "kept ")
			small, general, ok := strings.Cut(line, " || ")
			require.True(t, ok, line)
			if small == "nil" {
				declined++
				continue
			}
			decided++
			if hit {
				kept++
			}
			require.Equal(t, general, small, "chain %d, step %d: item %q, request %q", n, s, flat, argv)
			if strings.Contains(small, " h=") {
				refills++
			}
		}
	}
	t.Logf("check_small decided %d (%d on values it kept), declined %d; %d refills; %d other writes", decided, kept, declined, refills, pokes)
	require.Greater(t, decided, 2000)
	require.Greater(t, kept, 1000)
	require.Greater(t, declined, 100)
	require.Greater(t, refills, 300)
}

// TestCheckSmallRefillReachingCapacity: check_small takes a balance
// whose refill surely reaches the capacity as the capacity without
// dividing (the time since rf times the refill amount at or past the
// shortfall times the period). At the boundary, one millisecond before
// it, and where the products leave the exact range, it writes what
// check_any writes on the exact integers: the capacity exactly when the
// refill reaches it, the balance refilled below it otherwise.
func TestCheckSmallRefillReachingCapacity(t *testing.T) {
	c := redisserver.Client(t)
	ctx := context.Background()
	src := luaSource("int", "expired", "bucket", "consume_lib") + checkSmallLua
	exact := luaSource("int") + stringsOnly + luaSource("expired", "bucket", "consume_lib") + checkSmallLua
	const rf = int64(1_767_225_600_000)
	for _, tc := range []struct {
		name            string
		cp, ra, rp, tk  int64
		elapsed, amount int64
		reaches         bool // the refill reaches the capacity
	}{
		{"at the boundary", 100_000, 1000, 60_000, 99_000, 60_000, 1000, true},
		{"a millisecond before it", 100_000, 1000, 60_000, 99_000, 59_999, 1000, false},
		{"a remainder short of a token", 100_000, 7, 60_000, 99_999, 8571, 1, false},
		{"a remainder reaching a token", 100_000, 7, 60_000, 99_999, 8572, 1, true},
		{"2^30 a minute, a millisecond later", 1 << 30 * 1000, 1 << 30 * 1000, 60_000, 1<<30*1000 - 1000, 1, 1000, true},
		{"products past 2^53", 1 << 52, 1 << 52, 86_400_000, 1 << 51, 3, 1000, false},
		{"a debt refilled to the capacity", 1000, 1000, 1000, -5000, 6000, 1, true},
		{"a debt one millisecond short", 1000, 1000, 1000, -5000, 5999, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := fmt.Sprintf("%d|%d|%d", tc.cp, tc.ra, tc.rp)
			now := rf + tc.elapsed
			argv := []string{strconv.FormatInt(now, 10), "1", "l:rpm", params, "1", "l:rpm", strconv.FormatInt(tc.amount, 10)}
			flat := []string{"h", fmt.Sprintf("%d|1|0|0|", rf), "l:rpm", fmt.Sprintf("%s|%d|0", params, tc.tk)}
			args := []any{len(argv)}
			for _, a := range argv {
				args = append(args, a)
			}
			args = append(args, len(flat))
			for _, f := range flat {
				args = append(args, f)
			}
			got, err := c.Eval(ctx, src, nil, args...).Text()
			require.NoError(t, err)
			small, general, _ := strings.Cut(got, " || ")
			want, err := c.Eval(ctx, exact, nil, args...).Text()
			require.NoError(t, err)
			_, wantGeneral, _ := strings.Cut(want, " || ")
			require.Equal(t, wantGeneral, general)
			require.Equal(t, general, small)
			full := fmt.Sprintf("l:rpm=%s|%d|%d@", params, tc.cp-tc.amount, tc.amount)
			if tc.reaches {
				require.Contains(t, small, full)
			} else {
				require.NotContains(t, small, full)
			}
		})
	}
}
