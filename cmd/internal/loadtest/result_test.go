package loadtest

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResultMergeExact: recording into two results and merging them (after
// a trip through JSON, as between processes) gives the result of recording
// everything into one.
func TestResultMergeExact(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	whole, a, b := NewResult(), NewResult(), NewResult()
	recs := []*Recorder{NewRecorder(whole), NewRecorder(a), NewRecorder(b)}
	r := rand.New(rand.NewPCG(8, 9))
	for i := range 5000 {
		end := start.Add(time.Duration(r.IntN(20_000)) * time.Millisecond)
		o := Outcome(r.IntN(3))
		lat := time.Duration(r.IntN(50_000)) * time.Microsecond
		var consumed map[string]int64
		if o == Admitted {
			consumed = map[string]int64{"rpm": 1, "tpm": int64(r.IntN(900))}
		}
		err := errors.New([]string{"boom", "bang"}[r.IntN(2)])
		for _, rec := range []*Recorder{recs[0], recs[1+i%2]} {
			rec.Record(end, o, lat, 2*lat, consumed, nil, err)
			rec.recordCall("UpdateItem", OpStats{Calls: 1, Reported: 1, WCU: 2})
		}
	}
	whole.Start, whole.End, whole.Procs = start, start.Add(20*time.Second), 2
	a.Start, a.End, a.Procs = start, start.Add(19*time.Second), 1
	b.Start, b.End, b.Procs = start.Add(time.Second), start.Add(20*time.Second), 1
	merged := NewResult()
	for _, part := range []*Result{a, b} {
		data, err := json.Marshal(part)
		require.NoError(t, err)
		back := NewResult()
		require.NoError(t, json.Unmarshal(data, back))
		require.NoError(t, merged.Merge(back))
	}
	summary := func(r *Result) map[string]any {
		secs := map[int64][3]uint64{}
		for s, v := range r.Series {
			secs[s] = [3]uint64{v.Admitted, v.Denied, v.Failed}
		}
		return map[string]any{
			"counts": [3]uint64{r.Admitted, r.Denied, r.Failed}, "consumed": r.Consumed, "series": secs,
			"p50": r.Acquire.Quantile(0.5), "p99": r.Acquire.Quantile(0.99), "lease p99.9": r.Lease.Quantile(0.999),
			"max": r.Acquire.Max(), "ops": *r.Ops["UpdateItem"], "errors": r.Errors,
			"start": r.Start, "end": r.End, "procs": r.Procs,
		}
	}
	assert.Equal(t, summary(whole), summary(merged), "merged differs from whole")
}

func TestScenarioResolve(t *testing.T) {
	s := Scenario{Cascade: true, Entities: 25, Parents: 5, RPM: 10, TPM: 1000}
	require.NoError(t, s.Resolve())
	assert.True(t, s.StoredLimits, "cascade implies stored limits")
	assert.Equal(t, int64(50), s.ParentRPM)
	assert.Equal(t, int64(5000), s.ParentTPM)
	assert.Equal(t, [2]int64{500, 500}, s.TokensActual)
	assert.Equal(t, "load-project-002", s.ParentID(7))
	assert.Equal(t, "load-key-00007", s.EntityID(7))
	for _, bad := range []Scenario{
		{HotKeys: 200}, {HotShare: 0.5}, {HotKeys: 1, HotShare: 1.5}, {Cascade: true, Parents: 500},
		{TokensActual: [2]int64{9, 1}}, {Rate: -1}, {Concurrency: -1},
	} {
		assert.Error(t, bad.Resolve(), "Resolve(%+v) accepted", bad)
	}
	// Hot keys get their share of the picks.
	h := Scenario{Entities: 100, HotKeys: 2, HotShare: 0.8}
	require.NoError(t, h.Resolve())
	r := rand.New(rand.NewPCG(1, 2))
	hot := 0
	for range 10_000 {
		if h.pick(r) < 2 {
			hot++
		}
	}
	assert.InDelta(t, 8000, hot, 300, "picks of the hot keys out of 10000")
}
