package limiter

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestAggregatorKeyPredicates(t *testing.T) {
	for _, tc := range []struct {
		pk, sk        string
		bucket, audit bool
	}{
		{"ns1/BUCKET#e#api#0", "#STATE", true, false},
		{"ns1/BUCKET#e#api#0", "#META", false, false},
		{"BUCKET#e#api#0", "#STATE", false, false}, // no namespace
		{"ns1/ENTITY#e", "#STATE", false, false},
		{"ns1/AUDIT#e", "#AUDIT#01", false, true},
		{"AUDIT#e", "#AUDIT#01", false, false}, // the bare prefix of B7
		{"ns1/AUDIT#$SYSTEM", "#AUDIT#01", false, true},
	} {
		if got := IsBucketKey(tc.pk, tc.sk); got != tc.bucket {
			t.Errorf("IsBucketKey(%q, %q) = %v", tc.pk, tc.sk, got)
		}
		if got := IsAuditKey(tc.pk); got != tc.audit {
			t.Errorf("IsAuditKey(%q) = %v", tc.pk, got)
		}
	}
}

func TestUsageSnapshotUpdate(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	exp := at.Add(90 * 24 * time.Hour)
	in, err := UsageSnapshotUpdate("t", "ns1", UsageSnapshot{
		EntityID: "e", Resource: "gpt-4", WindowType: WindowHourly, WindowStart: at,
		Counters: map[string]int64{"tpm-x": -3, "rpm": 2, wcuLimitName: 9, "ttl": 1}, TotalEvents: 2,
	}, exp)
	if err != nil {
		t.Fatal(err)
	}
	if sk := in.Key[attrSK].(*types.AttributeValueMemberS).Value; sk != "#USAGE#gpt-4#2026-03-04T05:00:00Z" {
		t.Errorf("SK = %q", sk)
	}
	expr := aws.ToString(in.UpdateExpression)
	var names []string
	for _, n := range in.ExpressionAttributeNames {
		names = append(names, n)
	}
	joined := "," + strings.Join(names, ",") + ","
	if strings.Contains(expr, "tpm-x") || !strings.Contains(joined, ",tpm-x,") || !strings.Contains(joined, ",rpm,") {
		t.Errorf("expression %q names %v: limit names must go through placeholders (B6)", expr, names)
	}
	if strings.Contains(joined, ","+wcuLimitName+",") {
		t.Errorf("wcu counted: %v (B2)", names)
	}
	if !strings.HasPrefix(expr, "SET ") || !strings.Contains(expr, " ADD ") {
		t.Errorf("expression = %q", expr)
	}

	for name, s := range map[string]UsageSnapshot{
		"unknown window": {EntityID: "e", Resource: "r", WindowType: "weekly", WindowStart: at, Counters: map[string]int64{"rpm": 1}},
		"no entity":      {Resource: "r", WindowType: WindowDaily, WindowStart: at, Counters: map[string]int64{"rpm": 1}},
		"nothing to add": {EntityID: "e", Resource: "r", WindowType: WindowDaily, WindowStart: at, Counters: map[string]int64{wcuLimitName: 1}},
	} {
		if _, err := UsageSnapshotUpdate("t", "ns1", s, exp); err == nil {
			t.Errorf("%s: no error", name)
		} else if name != "unknown window" && !errors.Is(err, ErrValidation) {
			t.Errorf("%s: %v, want ErrValidation", name, err)
		}
	}
}

func TestUsageWindowStart(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("X", 3600))
	for w, want := range map[string]string{
		WindowHourly: "2026-03-04T04:00:00Z", WindowDaily: "2026-03-04T00:00:00Z", WindowMonthly: "2026-03-01T00:00:00Z",
	} {
		got, err := UsageWindowStart(w, at)
		if err != nil || got.Format(time.RFC3339) != want {
			t.Errorf("UsageWindowStart(%s) = %v, %v; want %s", w, got, err, want)
		}
	}
	if _, err := UsageWindowStart("weekly", at); err == nil {
		t.Error("weekly: no error")
	}
}
