package loadtest

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Outcome is what became of one acquire.
type Outcome int

// The outcomes.
const (
	Admitted Outcome = iota // acquired (and then committed)
	Denied                  // refused by a limit (a *RateLimitExceededError)
	Failed                  // any other error, of the acquire or the commit
)

// Second is what happened in one second of the run (by completion time).
type Second struct {
	Admitted uint64     `json:"admitted"`
	Denied   uint64     `json:"denied"`
	Failed   uint64     `json:"failed"`
	Latency  *Histogram `json:"latency"` // acquire latency, CoarsePrecision
}

func newSecond() *Second { return &Second{Latency: NewHistogram(CoarsePrecision)} }

func (s *Second) merge(o *Second) error {
	s.Admitted += o.Admitted
	s.Denied += o.Denied
	s.Failed += o.Failed
	return s.Latency.Merge(o.Latency)
}

// OpStats counts the DynamoDB calls of one operation.
type OpStats struct {
	Calls uint64 `json:"calls"`
	// Errors counts failed calls; ConditionalFailures those refused by a
	// condition (ConditionalCheckFailedException, or a
	// TransactionCanceledException with a ConditionalCheckFailed reason).
	Errors              uint64 `json:"errors"`
	ConditionalFailures uint64 `json:"conditional_failures"`
	// Reported counts the successful calls whose response carried
	// ConsumedCapacity; RCU and WCU sum it.
	Reported uint64  `json:"reported"`
	RCU      float64 `json:"rcu"`
	WCU      float64 `json:"wcu"`
	// Items counts the items of batch and transaction calls.
	Items uint64 `json:"items"`
}

func (s *OpStats) merge(o *OpStats) {
	s.Calls += o.Calls
	s.Errors += o.Errors
	s.ConditionalFailures += o.ConditionalFailures
	s.Reported += o.Reported
	s.RCU += o.RCU
	s.WCU += o.WCU
	s.Items += o.Items
}

// Result is the measurement of a run, or of several runs merged: counts,
// latency histograms, a per-second series and the DynamoDB calls. Results
// of several processes (or hosts) merge exactly with [Result.Merge]; they
// travel between processes as JSON. A Result is not safe for concurrent
// use; a [Recorder] builds one safely.
type Result struct {
	Scenario Scenario  `json:"scenario"`
	Endpoint string    `json:"endpoint"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Procs    int       `json:"procs"`

	Admitted uint64 `json:"admitted"`
	Denied   uint64 `json:"denied"`
	Failed   uint64 `json:"failed"`
	// Acquire is the latency of Acquire (admitted and denied); Lease the
	// time from Acquire to the end of Commit (admitted only).
	Acquire *Histogram `json:"acquire"`
	Lease   *Histogram `json:"lease"`
	// Consumed sums what the admitted leases were charged on their
	// entity's bucket, per limit (refunds cut by the lease's refund rule):
	// what the buckets' consumption counters must show.
	Consumed map[string]int64 `json:"consumed"`
	// ParentConsumed is the same for the parents' buckets of a cascade
	// (empty without one): a parent's limits may differ from its
	// children's, and so may the refunds their leases were cut to.
	ParentConsumed map[string]int64 `json:"parent_consumed,omitempty"`
	// Series maps the Unix second of completion to that second's counts.
	Series map[int64]*Second `json:"series"`
	// Ops maps a DynamoDB operation name to its calls during the run.
	Ops map[string]*OpStats `json:"ops"`
	// Errors counts error messages (the first maxErrorKinds kinds).
	Errors map[string]uint64 `json:"errors"`
}

// maxErrorKinds bounds the distinct error messages a Result keeps.
const maxErrorKinds = 20

// NewResult returns an empty result.
func NewResult() *Result {
	return &Result{
		Acquire: NewHistogram(FinePrecision), Lease: NewHistogram(FinePrecision),
		Consumed: map[string]int64{}, ParentConsumed: map[string]int64{}, Series: map[int64]*Second{}, Ops: map[string]*OpStats{}, Errors: map[string]uint64{},
	}
}

// Acquires returns the number of acquires: admitted, denied and failed.
func (r *Result) Acquires() uint64 { return r.Admitted + r.Denied + r.Failed }

// Duration returns the measured time.
func (r *Result) Duration() time.Duration { return r.End.Sub(r.Start) }

// Merge adds o to r: counts and histograms add, the series merge by second,
// the time span covers both. The scenario and endpoint of r are kept.
func (r *Result) Merge(o *Result) error {
	if o == nil {
		return nil
	}
	if r.Start.IsZero() || (!o.Start.IsZero() && o.Start.Before(r.Start)) {
		r.Start = o.Start
	}
	if o.End.After(r.End) {
		r.End = o.End
	}
	r.Procs += o.Procs
	r.Admitted += o.Admitted
	r.Denied += o.Denied
	r.Failed += o.Failed
	if err := errors.Join(r.Acquire.Merge(o.Acquire), r.Lease.Merge(o.Lease)); err != nil {
		return err
	}
	for k, v := range o.Consumed {
		r.Consumed[k] += v
	}
	for k, v := range o.ParentConsumed {
		if r.ParentConsumed == nil {
			r.ParentConsumed = map[string]int64{}
		}
		r.ParentConsumed[k] += v
	}
	for sec, s := range o.Series {
		mine, ok := r.Series[sec]
		if !ok {
			mine = newSecond()
			r.Series[sec] = mine
		}
		if err := mine.merge(s); err != nil {
			return err
		}
	}
	for op, s := range o.Ops {
		mine, ok := r.Ops[op]
		if !ok {
			mine = &OpStats{}
			r.Ops[op] = mine
		}
		mine.merge(s)
	}
	for msg, n := range o.Errors {
		if _, ok := r.Errors[msg]; ok || len(r.Errors) < maxErrorKinds {
			r.Errors[msg] += n
		}
	}
	return nil
}

// Seconds returns the series' seconds in order.
func (r *Result) Seconds() []int64 {
	out := make([]int64, 0, len(r.Series))
	for s := range r.Series {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Recorder collects a run's measurements from many goroutines into a
// Result, and the measurements since the last [Recorder.Tick] for live
// progress. It is safe for concurrent use. The zero value is not usable;
// call [NewRecorder].
type Recorder struct {
	mu   sync.Mutex // guards the fields below
	res  *Result
	tick *Result // since the last Tick
}

// NewRecorder returns a recorder filling res.
func NewRecorder(res *Result) *Recorder { return &Recorder{res: res, tick: NewResult()} }

// Record adds one acquire that ended at end: its outcome, the acquire
// latency, the whole lease's latency (admitted only), what it consumed
// (admitted only: on the entity's bucket, and on its parent's with a
// cascade) and its error (failed only).
func (rec *Recorder) Record(end time.Time, o Outcome, acquire, lease time.Duration, consumed, parentConsumed map[string]int64, err error) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, r := range []*Result{rec.res, rec.tick} {
		sec, ok := r.Series[end.Unix()]
		if !ok {
			sec = newSecond()
			r.Series[end.Unix()] = sec
		}
		switch o {
		case Admitted:
			r.Admitted++
			sec.Admitted++
			r.Lease.Record(lease)
			for k, v := range consumed {
				r.Consumed[k] += v
			}
			for k, v := range parentConsumed {
				if r.ParentConsumed == nil {
					r.ParentConsumed = map[string]int64{}
				}
				r.ParentConsumed[k] += v
			}
		case Denied:
			r.Denied++
			sec.Denied++
		default:
			r.Failed++
			sec.Failed++
			msg := fmt.Sprint(err)
			if _, ok := r.Errors[msg]; ok || len(r.Errors) < maxErrorKinds {
				r.Errors[msg]++
			}
		}
		if o != Failed {
			r.Acquire.Record(acquire)
			sec.Latency.Record(acquire)
		}
	}
}

// recordCall adds one DynamoDB call.
func (rec *Recorder) recordCall(op string, s OpStats) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, r := range []*Result{rec.res, rec.tick} {
		mine, ok := r.Ops[op]
		if !ok {
			mine = &OpStats{}
			r.Ops[op] = mine
		}
		mine.merge(&s)
	}
}

// Tick returns the measurements since the previous Tick (or the start).
func (rec *Recorder) Tick() *Result {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	t := rec.tick
	rec.tick = NewResult()
	return t
}

// Result returns the result being filled. Read it only after the run.
func (rec *Recorder) Result() *Result { return rec.res }
