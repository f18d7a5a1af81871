package lru

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// keys returns the held keys from most to least recently used, and checks
// that both lists and the map agree.
func keys[K comparable, V any](t *testing.T, c *Cache[K, V]) []K {
	t.Helper()
	var use []K
	for e := c.mru; e != nil; e = e.next {
		if e.next != nil && e.next.prev != e || e.next == nil && c.lru != e {
			t.Fatalf("use list broken at %v", e.key)
		}
		use = append(use, e.key)
	}
	n := 0
	for e := c.newest; e != nil; e = e.older {
		if e.older != nil && e.older.newer != e || e.older == nil && c.oldest != e {
			t.Fatalf("age list broken at %v", e.key)
		}
		if c.items[e.key] != e {
			t.Fatalf("age list holds %v, the map does not", e.key)
		}
		n++
	}
	if len(use) != len(c.items) || n != len(c.items) {
		t.Fatalf("use list %d, age list %d, map %d entries", len(use), n, len(c.items))
	}
	return use
}

func TestLeastRecentlyUsedGoesFirst(t *testing.T) {
	c := New[string, int](3, 0)
	for i, k := range []string{"a", "b", "c"} {
		if n := c.Add(k, i, t0); n != 0 {
			t.Fatalf("Add(%s) evicted %d", k, n)
		}
	}
	if v, ok := c.Get("a", t0); !ok || v != 0 {
		t.Fatalf("Get(a) = %d, %v", v, ok)
	}
	if n := c.Add("d", 3, t0); n != 1 {
		t.Fatalf("Add(d) evicted %d, want 1", n)
	}
	if got, want := keys(t, c), []string{"d", "a", "c"}; !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v (b was least recently used)", got, want)
	}
	if _, ok := c.Get("b", t0); ok {
		t.Error("b still held")
	}
	// Updating a key makes it most recently used and evicts nothing.
	if n := c.Add("c", 30, t0); n != 0 {
		t.Fatalf("Add(c) again evicted %d", n)
	}
	if got, want := keys(t, c), []string{"c", "d", "a"}; !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	if v, _ := c.Get("c", t0); v != 30 {
		t.Errorf("c = %d, want 30", v)
	}
	if c.Evictions() != 1 || c.Expirations() != 0 {
		t.Errorf("evictions %d, expirations %d; want 1, 0", c.Evictions(), c.Expirations())
	}
}

func TestExpiry(t *testing.T) {
	c := New[string, int](10, time.Minute)
	c.Add("a", 1, t0)
	c.Add("b", 2, t0.Add(30*time.Second))
	if _, ok := c.Get("a", t0.Add(time.Minute)); !ok {
		t.Fatal("a expired at its TTL")
	}
	// Reading does not extend the age.
	if _, ok := c.Get("a", t0.Add(time.Minute+time.Nanosecond)); ok {
		t.Fatal("a held after its TTL")
	}
	if got := keys(t, c); !slices.Equal(got, []string{"b"}) {
		t.Errorf("keys %v, want [b]: a read expired entry is dropped", got)
	}
	// Storing again starts the age again.
	c.Add("b", 3, t0.Add(80*time.Second))
	if v, ok := c.Get("b", t0.Add(139*time.Second)); !ok || v != 3 {
		t.Errorf("b = %d, %v at 139s; want 3, true", v, ok)
	}
	if c.Expirations() != 1 || c.Evictions() != 0 {
		t.Errorf("evictions %d, expirations %d; want 0, 1", c.Evictions(), c.Expirations())
	}
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
	if n := c.Add(4, 4, t0.Add(61*time.Second)); n != 0 {
		t.Errorf("Add(4) evicted %d live entries, want 0 (1 had expired)", n)
	}
	if got, want := keys(t, c), []int{4, 3, 2}; !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}

	c = New[int, int](100, time.Minute)
	for i := range 10 {
		c.Add(i, i, t0)
	}
	c.Add(100, 100, t0.Add(time.Hour))
	if c.Len() != 10-purgePerAdd+1 {
		t.Errorf("len %d after one Add past expiry, want %d", c.Len(), 10-purgePerAdd+1)
	}
	for i := range 10 {
		c.Add(200+i, 0, t0.Add(time.Hour))
	}
	if c.Len() != 11 {
		t.Errorf("len %d, want 11: the expired entries are gone", c.Len())
	}
	keys(t, c)
}

func TestRemoveClearAndDisabled(t *testing.T) {
	c := New[string, int](10, 0)
	for i, k := range []string{"a1", "b1", "a2", "b2"} {
		c.Add(k, i, t0)
	}
	if !c.Remove("b2") || c.Remove("b2") {
		t.Error("Remove(b2) twice: want true, then false")
	}
	if n := c.RemoveFunc(func(k string, _ int) bool { return k[0] == 'a' }); n != 2 {
		t.Errorf("RemoveFunc dropped %d, want 2", n)
	}
	if got := keys(t, c); !slices.Equal(got, []string{"b1"}) {
		t.Errorf("keys %v, want [b1]", got)
	}
	c.Clear()
	if c.Len() != 0 || len(keys(t, c)) != 0 {
		t.Errorf("len %d after Clear", c.Len())
	}
	c.Add("x", 1, t0)
	if _, ok := c.Get("x", t0); !ok {
		t.Error("x not held after Clear and Add")
	}

	off := New[string, int](0, time.Minute)
	if n := off.Add("x", 1, t0); n != 0 || off.Len() != 0 {
		t.Errorf("a cache of 0 entries holds %d after Add (evicted %d)", off.Len(), n)
	}
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
			if ok != mok || ok && v != m.value {
				t.Fatalf("step %d: Get(%d) = %d, %v; model %v", step, k, v, ok, m)
			}
			if ok {
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
			if !ok || e.value != m.value {
				t.Fatalf("step %d: key %d: cache %v, model %d", step, mk, e, m.value)
			}
		}
		if c.Len() > size {
			t.Fatalf("step %d: len %d > %d", step, c.Len(), size)
		}
		if step%1000 == 0 {
			keys(t, c)
		}
	}
	if c.Evictions() == 0 || c.Expirations() == 0 {
		t.Errorf("evictions %d, expirations %d: the run should exercise both", c.Evictions(), c.Expirations())
	}
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
