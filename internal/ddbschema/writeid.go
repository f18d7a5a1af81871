package ddbschema

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Write identifiers: how a retried write that already applied is
// recognised.
//
// A write that changes a bucket's balances is not idempotent: when DynamoDB
// applies it and the answer is lost (a 5xx after the write, a broken
// connection), sending it again would take its amounts twice. So every such
// write carries a random identifier ([WriteID]), and the item keeps the
// identifiers of its last [WriteIDSlots] writes in the attributes wid0
// (the newest) to wid3, binary values of eight bytes. The write shifts
// them by one (wid3 = wid2, …, wid0 = its own; DynamoDB evaluates every
// operand on the item as it was before the write) and is conditioned on
// its identifier being in none of them. A retry of a write that applied is
// therefore refused, and the item it returns (ALL_OLD) holds the
// identifier: the write counts as applied, once. A retry is recognised as
// long as fewer than WriteIDSlots other writes of the item applied between
// the write and its retry.
//
// The identifiers ride in the write itself: no read, no other request,
// about 50 bytes more on the item. They are not limits (their names do not
// start with b_), so readers of limits, the table's other clients and the
// stream aggregators, pass over them; a write that moved them alone consumed
// nothing.

// WriteIDSlots is how many write identifiers a bucket item keeps.
const WriteIDSlots = 4

// AttrWriteIDPrefix starts the names of the write identifier attributes:
// wid0 (the newest) to wid3.
const AttrWriteIDPrefix = "wid"

// writeIDAttrs are the names of the slots, newest first.
var writeIDAttrs = [WriteIDSlots]string{"wid0", "wid1", "wid2", "wid3"}

// writeIDNames are the placeholders of the slots in the requests that
// carry an identifier, and writeIDValue that of the identifier: distinct
// from the index-based ones of [Expr] (#a0, :v0).
var writeIDNames = [WriteIDSlots]string{"#wid0", "#wid1", "#wid2", "#wid3"}

const writeIDValue = ":wid"

// WriteIDValuePlaceholder is the placeholder of the identifier's value in
// a request carrying one (see [AddWriteID]): a request built from a
// template that already carries the expressions sets its value there.
const WriteIDValuePlaceholder = writeIDValue

// writeIDSet and writeIDCond are the SET clauses and the condition of a
// write carrying an identifier. A slot whose predecessor is missing (an
// item no write with an identifier has touched yet) takes the identifier
// itself.
var writeIDSet, writeIDCond = func() (string, string) {
	var set, eq []string
	for i := WriteIDSlots - 1; i > 0; i-- {
		set = append(set, writeIDNames[i]+" = if_not_exists("+writeIDNames[i-1]+", "+writeIDValue+")")
	}
	set = append(set, writeIDNames[0]+" = "+writeIDValue)
	for i := range WriteIDSlots {
		eq = append(eq, writeIDNames[i]+" = "+writeIDValue)
	}
	return strings.Join(set, ", "), "NOT (" + strings.Join(eq, " OR ") + ")"
}()

// WriteID identifies one logical write of a bucket item; zero means none.
type WriteID uint64

// NewWriteID returns a random, non-zero identifier.
func NewWriteID() WriteID {
	for {
		if id := WriteID(rand.Uint64()); id != 0 {
			return id
		}
	}
}

// writeIDValueOf is the attribute value of an identifier with its bytes,
// in one allocation.
type writeIDValueOf struct {
	av types.AttributeValueMemberB
	b  [8]byte
}

// Value returns the identifier as the attribute value the item stores
// (eight bytes, big-endian).
func (id WriteID) Value() types.AttributeValue {
	v := new(writeIDValueOf)
	binary.BigEndian.PutUint64(v.b[:], uint64(id))
	v.av.Value = v.b[:]
	return &v.av
}

// In reports whether item holds id among its write identifiers: the write
// that carried it applied. It is false for the zero id.
func (id WriteID) In(item map[string]types.AttributeValue) bool {
	if id == 0 {
		return false
	}
	for i := range writeIDAttrs {
		if writeIDAt(item, i) == id {
			return true
		}
	}
	return false
}

// NewestWriteIDs returns the identifiers of item's newest write (wid0)
// and of the write before it (wid1), zero for a slot the item lacks: a
// write that returned the item (ALL_NEW) followed the one of prior
// directly, so a writer that knows the newest identifier of the item it
// decided on sees from prior whether another write came between.
func NewestWriteIDs(item map[string]types.AttributeValue) (newest, prior WriteID) {
	return writeIDAt(item, 0), writeIDAt(item, 1)
}

// writeIDAt is the identifier in slot i of item (wid{i}), zero when the
// slot is missing or holds no eight bytes.
func writeIDAt(item map[string]types.AttributeValue, i int) WriteID {
	if v, ok := item[writeIDAttrs[i]].(*types.AttributeValueMemberB); ok && len(v.Value) == 8 {
		return WriteID(binary.BigEndian.Uint64(v.Value))
	}
	return 0
}

// AddWriteID makes u, a bucket item's update built with an [Expr] (its
// placeholders index-based), carry id: the slots shift and take id, on
// condition that none holds it yet. It changes u's expressions and maps
// in place (the value map is created when u has none). A zero id leaves u
// as it is.
func AddWriteID(u *types.Update, id WriteID) {
	if id == 0 {
		return
	}
	expr := writeIDSet
	switch e := derefOr(u.UpdateExpression); {
	case strings.HasPrefix(e, "SET "):
		expr = "SET " + writeIDSet + ", " + e[len("SET "):]
	case e != "":
		expr = "SET " + writeIDSet + " " + e
	default:
		expr = "SET " + writeIDSet
	}
	u.UpdateExpression = &expr
	cond := writeIDCond
	if c := derefOr(u.ConditionExpression); c != "" {
		cond = c + " AND " + writeIDCond
	}
	u.ConditionExpression = &cond
	if u.ExpressionAttributeNames == nil {
		u.ExpressionAttributeNames = make(map[string]string, WriteIDSlots)
	}
	for i, p := range writeIDNames {
		u.ExpressionAttributeNames[p] = writeIDAttrs[i]
	}
	if u.ExpressionAttributeValues == nil {
		u.ExpressionAttributeValues = make(map[string]types.AttributeValue, 1)
	}
	u.ExpressionAttributeValues[writeIDValue] = id.Value()
}

// PutWriteID sets id as the newest write identifier of item, a whole
// bucket item about to be put (a zero id sets nothing).
func PutWriteID(item map[string]types.AttributeValue, id WriteID) {
	if id != 0 {
		item[writeIDAttrs[0]] = id.Value()
	}
}

// RenewWriteID gives a request built here that carries a write identifier
// a new random one, in its values (the request's own map): a replay of the
// request then applies again, as a new write. It reports whether the
// request carries one.
func RenewWriteID(values map[string]types.AttributeValue) bool {
	if _, ok := values[writeIDValue]; !ok {
		return false
	}
	values[writeIDValue] = NewWriteID().Value()
	return true
}

func derefOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
