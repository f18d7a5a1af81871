package loadtest

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
			rec.Record(end, o, lat, 2*lat, consumed, err)
			rec.recordCall("UpdateItem", OpStats{Calls: 1, Reported: 1, WCU: 2})
		}
	}
	whole.Start, whole.End, whole.Procs = start, start.Add(20*time.Second), 2
	a.Start, a.End, a.Procs = start, start.Add(19*time.Second), 1
	b.Start, b.End, b.Procs = start.Add(time.Second), start.Add(20*time.Second), 1
	merged := NewResult()
	for _, part := range []*Result{a, b} {
		data, err := json.Marshal(part)
		if err != nil {
			t.Fatal(err)
		}
		back := NewResult()
		if err := json.Unmarshal(data, back); err != nil {
			t.Fatal(err)
		}
		if err := merged.Merge(back); err != nil {
			t.Fatal(err)
		}
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
	if diff := cmp.Diff(summary(whole), summary(merged)); diff != "" {
		t.Errorf("merged differs from whole (-whole +merged):\n%s", diff)
	}
}

func TestScenarioResolve(t *testing.T) {
	s := Scenario{Cascade: true, Entities: 25, Parents: 5, RPM: 10, TPM: 1000}
	if err := s.Resolve(); err != nil {
		t.Fatal(err)
	}
	if !s.StoredLimits || s.ParentRPM != 50 || s.ParentTPM != 5000 || s.TokensActual != [2]int64{500, 500} {
		t.Errorf("resolved cascade scenario = %+v", s)
	}
	if s.ParentID(7) != "load-project-002" || s.EntityID(7) != "load-key-00007" {
		t.Errorf("ids %s, %s", s.ParentID(7), s.EntityID(7))
	}
	for _, bad := range []Scenario{
		{HotKeys: 200}, {HotShare: 0.5}, {HotKeys: 1, HotShare: 1.5}, {Cascade: true, Parents: 500},
		{TokensActual: [2]int64{9, 1}}, {Rate: -1}, {Concurrency: -1},
	} {
		if err := bad.Resolve(); err == nil {
			t.Errorf("Resolve(%+v) accepted", bad)
		}
	}
	// Hot keys get their share of the picks.
	h := Scenario{Entities: 100, HotKeys: 2, HotShare: 0.8}
	if err := h.Resolve(); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	hot := 0
	for range 10_000 {
		if h.pick(r) < 2 {
			hot++
		}
	}
	if hot < 7700 || hot > 8300 {
		t.Errorf("%d of 10000 picks hot, want about 8000", hot)
	}
}
