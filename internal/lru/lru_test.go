package lru

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// keys returns the held keys from most to least recently used, and checks
// that both lists and the map agree.
func keys[K comparable, V any](t *testing.T, c *Cache[K, V]) []K {
	t.Helper()
	var use []K
	for e := c.mru; e != nil; e = e.next {
		if e.next != nil {
			require.Same(t, e, e.next.prev, "use list broken at %v", e.key)
		} else {
			require.Same(t, e, c.lru, "use list broken at %v", e.key)
		}
		use = append(use, e.key)
	}
	n := 0
	for e := c.newest; e != nil; e = e.older {
		if e.older != nil {
			require.Same(t, e, e.older.newer, "age list broken at %v", e.key)
		} else {
			require.Same(t, e, c.oldest, "age list broken at %v", e.key)
		}
		require.Same(t, e, c.items[e.key], "age list holds %v, the map does not", e.key)
		n++
	}
	require.Len(t, use, len(c.items), "use list %d, age list %d, map %d entries", len(use), n, len(c.items))
	require.Equal(t, len(c.items), n, "use list %d, age list %d, map %d entries", len(use), n, len(c.items))
	return use
}

func TestLeastRecentlyUsedGoesFirst(t *testing.T) {
	c := New[string, int](3, 0)
	for i, k := range []string{"a", "b", "c"} {
		require.EqualValues(t, 0, c.Add(k, i, t0))
	}
	v, ok := c.Get("a", t0)
	require.True(t, ok, "Get(a) = %d, %v", v, ok)
	require.EqualValues(t, 0, v, "Get(a) = %d, %v", v, ok)
	require.EqualValues(t, 1, c.Add("d", 3, t0), "Add(d) evicted")
	got, want := keys(t, c), []string{"d", "a", "c"}
	assert.Equal(t, want, got, "keys %v, want %v (b was least recently used)", got, want)
	_, ok = c.Get("b", t0)
	assert.False(t, ok, "b still held")
	// Updating a key makes it most recently used and evicts nothing.
	require.EqualValues(t, 0, c.Add("c", 30, t0), "Add(c) again evicted")
	got, want = keys(t, c), []string{"c", "d", "a"}
	assert.Equal(t, want, got, "keys %v, want %v", got, want)
	v, _ = c.Get("c", t0)
	assert.EqualValues(t, 30, v, "c = %d, want 30", v)
	assert.EqualValues(t, 1, c.Evictions(), "evictions %d, expirations %d; want 1, 0", c.Evictions(), c.Expirations())
	assert.EqualValues(t, 0, c.Expirations(), "evictions %d, expirations %d; want 1, 0", c.Evictions(), c.Expirations())
}

func TestExpiry(t *testing.T) {
	c := New[string, int](10, time.Minute)
	c.Add("a", 1, t0)
	c.Add("b", 2, t0.Add(30*time.Second))
	_, ok := c.Get("a", t0.Add(time.Minute))
	require.True(t, ok, "a expired at its TTL")
	// Reading does not extend the age.
	_, ok = c.Get("a", t0.Add(time.Minute+time.Nanosecond))
	require.False(t, ok, "a held after its TTL")
	assert.Equal(t, []string{"b"}, keys(t, c), "keys")
	// Storing again starts the age again.
	c.Add("b", 3, t0.Add(80*time.Second))
	v, ok := c.Get("b", t0.Add(139*time.Second))
	assert.True(t, ok, "b = %d, %v at 139s; want 3, true", v, ok)
	assert.EqualValues(t, 3, v, "b = %d, %v at 139s; want 3, true", v, ok)
	assert.EqualValues(t, 1, c.Expirations(), "evictions %d, expirations %d; want 0, 1", c.Evictions(), c.Expirations())
	assert.EqualValues(t, 0, c.Evictions(), "evictions %d, expirations %d; want 0, 1", c.Evictions(), c.Expirations())
}

// TestExpiredGoFirst: when room is needed, an expired entry goes before the
// least recently used live one, and every Add drops a few expired entries
// even when there is room.
func TestExpiredGoFirst(t *testing.T) {
	c := New[int, int](3, time.Minute)
	c.Add(1, 1, t0)                     // expires at 60s
	c.Add(2, 2, t0.Add(50*time.Second)) // expires at 110s
	c.Add(3, 3, t0.Add(50*time.Second))
	c.Get(2, t0.Add(55*time.Second))
	c.Get(3, t0.Add(55*time.Second))
	c.Get(1, t0.Add(59*time.Second)) // 1 is most recently used, and oldest
	assert.EqualValues(t, 0, c.Add(4, 4, t0.Add(61*time.Second)), "Add(4) evicted")
	got, want := keys(t, c), []int{4, 3, 2}
	assert.Equal(t, want, got, "keys %v, want %v", got, want)

	c = New[int, int](100, time.Minute)
	for i := range 10 {
		c.Add(i, i, t0)
	}
	c.Add(100, 100, t0.Add(time.Hour))
	assert.Equal(t, 10-purgePerAdd+1, c.Len(), "len %d after one Add past expiry, want %d", c.Len(), 10-purgePerAdd+1)
	for i := range 10 {
		c.Add(200+i, 0, t0.Add(time.Hour))
	}
	assert.EqualValues(t, 11, c.Len(), "len %d, want 11: the expired entries are gone", c.Len())
	keys(t, c)
}

func TestRemoveClearAndDisabled(t *testing.T) {
	c := New[string, int](10, 0)
	for i, k := range []string{"a1", "b1", "a2", "b2"} {
		c.Add(k, i, t0)
	}
	assert.True(t, c.Remove("b2"), "Remove(b2) twice: want true, then false")
	assert.False(t, c.Remove("b2"), "Remove(b2) twice: want true, then false")
	assert.EqualValues(t, 2, c.RemoveFunc(func(k string, _ int) bool { return k[0] == 'a' }), "RemoveFunc dropped")
	assert.Equal(t, []string{"b1"}, keys(t, c), "keys")
	c.Clear()
	assert.EqualValues(t, 0, c.Len(), "len %d after Clear", c.Len())
	assert.Empty(t, keys(t, c), "len %d after Clear", c.Len())
	c.Add("x", 1, t0)
	_, ok := c.Get("x", t0)
	assert.True(t, ok, "x not held after Clear and Add")

	off := New[string, int](0, time.Minute)
	assert.EqualValues(t, 0, off.Add("x", 1, t0), "a cache of 0 entries holds")
	assert.EqualValues(t, 0, off.Len(), "a cache of 0 entries holds")
}

// TestRandomAgainstModel compares random operations with a simple model.
func TestRandomAgainstModel(t *testing.T) {
	type modelEntry struct {
		value   int
		expires time.Time
		used    int // logical time of last use
	}
	r := rand.New(rand.NewPCG(1, 2))
	const size = 8
	ttl := 10 * time.Second
	c := New[int, int](size, ttl)
	model := map[int]*modelEntry{}
	now := t0
	tick := 0
	for step := range 20000 {
		now = now.Add(time.Duration(r.IntN(1000)) * time.Millisecond)
		tick++
		k := r.IntN(20)
		switch op := r.IntN(10); {
		case op < 5:
			v, ok := c.Get(k, now)
			m, mok := model[k]
			if mok && now.After(m.expires) {
				delete(model, k)
				mok = false
			}
			require.Equal(t, mok, ok, "step %d: Get(%d) = %d, %v; model %v", step, k, v, ok, m)
			if ok {
				require.Equal(t, m.value, v, "step %d: Get(%d); model %v", step, k, m)
				m.used = tick
			}
		case op < 9:
			if m, ok := model[k]; ok && !now.After(m.expires) {
				*m = modelEntry{value: step, expires: now.Add(ttl), used: tick}
				c.Add(k, step, now)
				break
			}
			delete(model, k)
			// The cache may have dropped expired entries the model still
			// holds; drop them from the model too when they are gone.
			for mk, m := range model {
				if now.After(m.expires) {
					delete(model, mk)
				}
			}
			if len(model) >= size {
				oldest, ot := 0, tick+1
				for mk, m := range model {
					if m.used < ot {
						oldest, ot = mk, m.used
					}
				}
				delete(model, oldest)
			}
			model[k] = &modelEntry{value: step, expires: now.Add(ttl), used: tick}
			c.Add(k, step, now)
		default:
			c.Remove(k)
			delete(model, k)
		}
		// Every live model entry is in the cache, with its value.
		for mk, m := range model {
			if now.After(m.expires) {
				continue
			}
			e, ok := c.items[mk]
			require.True(t, ok, "step %d: key %d: cache %v, model %d", step, mk, e, m.value)
			require.Equal(t, m.value, e.value, "step %d: key %d: cache %v, model %d", step, mk, e, m.value)
		}
		require.LessOrEqual(t, c.Len(), size, "step %d: len %d > %d", step, c.Len(), size)
		if step%1000 == 0 {
			keys(t, c)
		}
	}
	assert.NotZero(t, c.Evictions(), "evictions %d, expirations %d: the run should exercise both", c.Evictions(), c.Expirations())
	assert.NotZero(t, c.Expirations(), "evictions %d, expirations %d: the run should exercise both", c.Evictions(), c.Expirations())
}

func BenchmarkAddGet(b *testing.B) {
	c := New[string, int](10_000, time.Minute)
	ks := make([]string, 50_000)
	for i := range ks {
		ks[i] = fmt.Sprint("entity-", i)
	}
	now := t0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := ks[i%len(ks)]
		if _, ok := c.Get(k, now); !ok {
			c.Add(k, i, now)
		}
	}
}
