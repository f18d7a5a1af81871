// Layer 5, the DynamoDB repository: the writes of adjustments (commits,
// rollbacks, give-backs), built from cached templates.

package limiter

import (
	"encoding/binary"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// An adjustment is written on every commit of a lease that changed, and
// on every give-back of a slot, so its UpdateItem is built from a
// template, as the speculative write is. Its expressions and attribute
// names depend only on the names of the limits adjusted and on the
// decisions the write takes per limit (charge or refund, the capacity
// known or not, the limit's exact state known or not, its case on the
// item read, yielded or not), never on the numbers: a template holds the
// two expressions and the names, and a request adds its numbers, key and
// write identifier.
//
// One walk over the adjustment (adjustWalk) both decides and, when no
// template of its shape is kept yet, writes the template: the shape is
// the sequence of the walk's decisions and limit names, the numbers are
// the values the walk uses in the order it uses them, so a template and
// the numbers filled into it cannot disagree. Every decision of the walk
// that changes an expression goes through adjustWalk.when.

// adjustMode selects the write an adjustWalk builds.
type adjustMode uint8

const (
	// adjustOptimistic is the first write of an adjustment (see
	// optimisticAdjust).
	adjustOptimistic adjustMode = iota
	// adjustExactMode is a rewrite from the item as read (see
	// exactAdjust).
	adjustExactMode
	// adjustExactYield is adjustExactMode from adjustYieldRound on.
	adjustExactYield
)

// adjustTemplates builds the UpdateItems of a table's adjustments from
// cached templates. It is safe for concurrent use.
type adjustTemplates struct {
	table *string
	// templates maps a shape to its template; replaced, never changed,
	// under mu.
	templates atomic.Pointer[map[string]*adjustTemplate]
	mu        sync.Mutex
}

// newAdjustTemplates returns the builder of table's adjustments.
func newAdjustTemplates(table string) *adjustTemplates {
	u := &adjustTemplates{table: &table}
	m := map[string]*adjustTemplate{}
	u.templates.Store(&m)
	return u
}

// adjustTemplate is an adjustment's write without its numbers, key and
// write identifier. It is shared read-only by concurrent requests.
type adjustTemplate struct {
	cond, update *string
	names        map[string]string
	// slots are the placeholders of the numbers, in the order of the walk.
	slots []string
}

// input returns the write (mode) of adjustment w of the item key, from
// base (optimistic: the item as last seen, nil when none is kept; exact:
// the item as read), carrying the write identifier id; nil when the walk
// writes nothing (an exact write of an item that holds none of w's
// limits). key goes into the input as is.
func (u *adjustTemplates) input(key map[string]types.AttributeValue, mode adjustMode, w *store.BucketWrite, base *store.Bucket, id ddbschema.WriteID) *dynamodb.UpdateItemInput {
	a := adjustWalks.Get().(*adjustWalk)
	defer adjustWalks.Put(a)
	a.shape, a.text, a.ends = a.shape[:0], a.text[:0], a.ends[:0]
	if !a.walk(mode, w, base) {
		return nil
	}
	t := (*u.templates.Load())[string(a.shape)]
	if t == nil {
		t = u.template(string(a.shape), mode, w, base)
	}
	values := make(map[string]types.AttributeValue, len(t.slots)+1)
	values[ddbschema.WriteIDValuePlaceholder] = id.Value()
	// The numbers in two allocations: their digits in one string, their
	// attribute values in one array.
	all := string(a.text)
	avs := make([]types.AttributeValueMemberN, len(a.ends))
	start := 0
	for i, end := range a.ends {
		avs[i].Value = all[start:end]
		start = end
		values[t.slots[i]] = &avs[i]
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           u.table,
		Key:                                 key,
		UpdateExpression:                    t.update,
		ConditionExpression:                 t.cond,
		ExpressionAttributeNames:            t.names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// template writes the template of shape by walking w again, and keeps it
// (ddbschema.KeepTemplate: at most 256 shapes, then afresh, since the
// names of in-flight generations change every half slot TTL).
func (u *adjustTemplates) template(shape string, mode adjustMode, w *store.BucketWrite, base *store.Bucket) *adjustTemplate {
	tb := &adjustTemplateBuild{names: map[string]string{}, byName: map[string]string{}}
	a := adjustWalk{tb: tb}
	a.walk(mode, w, base)
	t := tb.finish()
	u.mu.Lock()
	defer u.mu.Unlock()
	old := *u.templates.Load()
	if kept, ok := old[shape]; ok {
		return kept
	}
	m := ddbschema.KeepTemplate(old, shape, t)
	u.templates.Store(&m)
	return t
}

// adjustTemplateBuild accumulates a template's expressions and names,
// with the placeholders of an [ddbschema.Expr]: names #a0, #a1, … in
// order of first use, values :v0, :v1, … in order of use.
type adjustTemplateBuild struct {
	names, byName           map[string]string
	nValues                 int
	conds, set, add, remove []string
}

func (tb *adjustTemplateBuild) name(attr string) string {
	if p, ok := tb.byName[attr]; ok {
		return p
	}
	p := "#a" + strconv.Itoa(len(tb.names))
	tb.names[p], tb.byName[attr] = attr, p
	return p
}

// finish returns the template, carrying a write identifier as
// ddbschema.AddWriteID makes an update carry one.
func (tb *adjustTemplateBuild) finish() *adjustTemplate {
	update, cond := updateExpr(tb.set, tb.add, tb.remove), strings.Join(tb.conds, " AND ")
	u := &types.Update{
		UpdateExpression:          &update,
		ConditionExpression:       &cond,
		ExpressionAttributeNames:  tb.names,
		ExpressionAttributeValues: map[string]types.AttributeValue{},
	}
	ddbschema.AddWriteID(u, 1)
	t := &adjustTemplate{cond: u.ConditionExpression, update: u.UpdateExpression, names: u.ExpressionAttributeNames, slots: make([]string, tb.nValues)}
	for i := range t.slots {
		t.slots[i] = ":v" + strconv.Itoa(i)
	}
	return t
}

// adjustWalks keeps the walkers of requests (no template written), whose
// buffers would otherwise be allocated for each.
var adjustWalks = sync.Pool{New: func() any {
	return &adjustWalk{shape: make([]byte, 0, 256), text: make([]byte, 0, 512), ends: make([]int, 0, 32)}
}}

// adjustWalk walks an adjustment: it records the decisions taken (shape)
// and the numbers used (text, ends: their digits and where each ends),
// and, with tb set, writes the expressions. Without tb, the placeholders
// and clauses it returns are empty and nothing is written.
type adjustWalk struct {
	shape []byte
	text  []byte
	ends  []int
	tb    *adjustTemplateBuild
}

// when records the decision c and returns it.
func (a *adjustWalk) when(c bool) bool {
	if c {
		a.shape = append(a.shape, '1')
	} else {
		a.shape = append(a.shape, '0')
	}
	return c
}

// limit records the name of the limit walked next.
func (a *adjustWalk) limit(name string) {
	a.shape = binary.AppendUvarint(a.shape, uint64(len(name)))
	a.shape = append(a.shape, name...)
}

// name returns the placeholder of attribute attr.
func (a *adjustWalk) name(attr string) string {
	if a.tb == nil {
		return ""
	}
	return a.tb.name(attr)
}

// attr returns the placeholder of limit's attribute field.
func (a *adjustWalk) attr(limit, field string) string {
	if a.tb == nil {
		return ""
	}
	return a.tb.name(bucketAttr(limit, field))
}

// used records the number that ends the digits and returns its
// placeholder.
func (a *adjustWalk) used() string {
	a.ends = append(a.ends, len(a.text))
	if a.tb == nil {
		return ""
	}
	p := ":v" + strconv.Itoa(a.tb.nValues)
	a.tb.nValues++
	return p
}

// n returns the placeholder of the number v.
func (a *adjustWalk) n(v int64) string {
	a.text = strconv.AppendInt(a.text, v, 10)
	return a.used()
}

// sig returns the placeholder of the parameters' signature (see
// ddbschema.ParamsSig), which ddbschema.Signed must hold.
func (a *adjustWalk) sig(capacityMilli, refillAmountMilli, refillPeriodMs int64) string {
	a.text, _ = ddbschema.AppendParamsSig(a.text, capacityMilli, refillAmountMilli, refillPeriodMs)
	return a.used()
}

// cond, set, add and remove append a clause made of parts.
func (a *adjustWalk) cond(parts ...string) {
	if a.tb != nil {
		a.tb.conds = append(a.tb.conds, strings.Join(parts, ""))
	}
}

func (a *adjustWalk) set(parts ...string) {
	if a.tb != nil {
		a.tb.set = append(a.tb.set, strings.Join(parts, ""))
	}
}

func (a *adjustWalk) add(parts ...string) {
	if a.tb != nil {
		a.tb.add = append(a.tb.add, strings.Join(parts, ""))
	}
}

func (a *adjustWalk) remove(parts ...string) {
	if a.tb != nil {
		a.tb.remove = append(a.tb.remove, strings.Join(parts, ""))
	}
}

// walk walks w in mode from base (see adjustTemplates.input). It reports
// whether there is a write: false when the exact walk finds none of w's
// limits in base.
func (a *adjustWalk) walk(mode adjustMode, w *store.BucketWrite, base *store.Bucket) bool {
	a.shape = append(a.shape, byte(mode))
	a.cond("attribute_exists(", a.name(attrPK), ")")
	if a.when(w.Incarnation == 0) {
		a.cond("attribute_not_exists(", a.name(ddbschema.AttrIncarnation), ")")
	} else {
		a.cond(a.name(ddbschema.AttrIncarnation), " = ", a.n(w.Incarnation))
	}
	if mode == adjustOptimistic {
		for i := range w.Limits {
			a.optimisticLimit(&w.Limits[i], w.NowMs, base)
		}
		return true
	}
	present := false
	for i := range w.Limits {
		if a.exactLimit(&w.Limits[i], base, mode == adjustExactYield) {
			present = true
		}
	}
	return present
}

// optimisticLimit walks limit l of the optimistic write: ADD its delta,
// conditioned on the limit existing and, for a refund with a known
// capacity, on the refund fitting under it. kept, the item as last seen
// (nil when none is kept), supplies the refill parameters that move a
// refunded limit's fa (see exactState).
func (a *adjustWalk) optimisticLimit(l *store.LimitWrite, nowMs int64, kept *store.Bucket) {
	a.limit(l.Name)
	tk := a.attr(l.Name, fieldTokens)
	cp := a.attr(l.Name, fieldCapacity)
	v := a.n(-l.ConsumedMilli)
	a.add(tk, " ", v)
	a.add(a.attr(l.Name, fieldTotalConsumed), " ", a.n(l.ConsumedMilli))
	var s *store.BucketState
	if st, ok := kept.State(l.Name); a.when(ok && st.CapacityMilli == l.CapacityMilli) {
		s = &st
	}
	a.exactState(l.Name, v, l.ConsumedMilli, s)
	switch {
	case a.when(l.ConsumedMilli > 0):
		// A charge is taken from the stored balance only while the limit
		// cannot have refilled to its capacity by now (its exact state,
		// as the speculative take is conditioned); otherwise the exact
		// write refills the item first.
		a.cond("attribute_exists(", cp, ")")
		a.cond(a.attr(l.Name, fieldFullAt), " > ", a.n(nowMs))
		a.cond(tk, " = ", a.attr(l.Name, fieldShadow))
		if s != nil && a.when(ddbschema.Signed(s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)) {
			a.cond(a.attr(l.Name, fieldParams), " = ", a.sig(s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs))
		}
	case a.when(l.ConsumedMilli == 0):
		a.cond("attribute_exists(", cp, ")")
	case a.when(l.CapacityMilli > 0):
		// A refund of R fits when tk ≤ capacity − R.
		a.cond(cp, " = ", a.n(l.CapacityMilli))
		a.cond(tk, " <= ", a.n(bucketmath.AddSat(l.CapacityMilli, l.ConsumedMilli)))
	default:
		a.cond("attribute_not_exists(", cp, ")") // unknown capacity: always take the exact path
	}
}

// exactLimit walks limit l of the exact write from old: a charge is
// ADDed, a refund takes the case of its balance, with the item's
// capacity; the total is ADDed. With yield, a refund on a limit read full
// or to be capped is left out (see adjustYieldRound). It reports whether
// old holds l.
func (a *adjustWalk) exactLimit(l *store.LimitWrite, old *store.Bucket, yield bool) bool {
	a.limit(l.Name)
	s, ok := old.State(l.Name)
	if !a.when(ok) {
		return false // removed from the item: nothing to adjust
	}
	a.add(a.attr(l.Name, fieldTotalConsumed), " ", a.n(l.ConsumedMilli))
	c := s.CapacityMilli
	fits := bucketmath.AddSat(c, l.ConsumedMilli) // C − R
	if a.when(yield && l.ConsumedMilli < 0 && s.TokensMilli > fits) {
		return true // full or to be capped: left as it is (see adjustYieldRound)
	}
	tk := a.attr(l.Name, fieldTokens)
	cp := a.attr(l.Name, fieldCapacity)
	if a.when(l.ConsumedMilli >= 0) {
		v := a.n(-l.ConsumedMilli)
		a.add(tk, " ", v)
		a.exactState(l.Name, v, l.ConsumedMilli, &s)
		a.cond("attribute_exists(", cp, ")")
		if a.when(l.ConsumedMilli > 0) {
			// Not full by now on old (see exactAdjust), so not on a
			// balance no higher with the same rf.
			a.cond(tk, " <= ", a.n(s.TokensMilli))
			a.cond(a.name(attrRefill), " = ", a.n(old.RefillMs))
		}
		return true
	}
	a.cond(cp, " = ", a.n(c))
	switch {
	case a.when(s.TokensMilli >= c):
		a.cond(tk, " >= ", a.n(c))
	case a.when(s.TokensMilli > fits):
		// Capped at the capacity: the limit is full, its fa goes (the
		// speculative write refuses it until an exact write).
		a.cond(tk, " > ", a.n(fits))
		a.cond(tk, " < ", a.n(c))
		v := a.n(c)
		a.set(tk, " = ", v)
		a.set(a.attr(l.Name, fieldShadow), " = ", v)
		a.remove(a.attr(l.Name, fieldFullAt))
	default:
		a.cond(tk, " <= ", a.n(fits))
		v := a.n(-l.ConsumedMilli)
		a.add(tk, " ", v)
		a.exactState(l.Name, v, l.ConsumedMilli, &s)
	}
	return true
}

// exactState writes the clauses that keep a limit's exact state through
// an adjustment of consumed millitokens, as adjustExact does: its copy ts
// moves alike (by the placeholder v of −consumed); a charge leaves fa; a
// refund moves fa earlier by what it may advance that time, computed from
// the refill amount and period of s (conditioned on them), or removes fa
// when s is nil.
func (a *adjustWalk) exactState(name, v string, consumed int64, s *store.BucketState) {
	a.add(a.attr(name, fieldShadow), " ", v)
	if a.when(consumed >= 0) {
		return
	}
	fa := a.attr(name, fieldFullAt)
	if a.when(s == nil) {
		a.remove(fa)
		return
	}
	a.add(fa, " ", a.n(-bucketmath.GiveDelayMs(-consumed, s.RefillAmountMilli, s.RefillPeriodMs)))
	a.cond(a.attr(name, fieldRefillAmount), " = ", a.n(s.RefillAmountMilli))
	a.cond(a.attr(name, fieldRefillPeriod), " = ", a.n(s.RefillPeriodMs))
}
