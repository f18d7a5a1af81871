package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"
)

// TestLoadContender runs a tiny scenario with this tree's zae-limiter and
// HEAD's in alternating rounds, each on a fresh table: the report has
// both programs' figures and their ratio on every line, refused writes
// per acquire among them.
func TestLoadContender(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	e := newEnv(t)
	t.Cleanup(func() {
		out, err := e.client.ListTables(context.Background(), &dynamodb.ListTablesInput{})
		if err != nil {
			return
		}
		for _, name := range out.TableNames {
			if strings.HasPrefix(name, e.table+"-") {
				_, _ = e.client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
			}
		}
	})
	code, out, errs := e.cli("load", "--contender", "HEAD", "--rounds", "2", "--entities", "2", "--rpm", "1", "-d", "1s", "-c", "2")
	require.Equal(t, exitOK, code, "stderr %s", errs)
	t.Log("\n" + out)
	for _, metric := range []string{"acquires/s", "acquire p50", "calls per acquire", "refused writes per acquire", "charged WCU per acquire", "admitted share"} {
		require.Regexp(t, regexp.MustCompile(`(?m)^ *`+regexp.QuoteMeta(metric)+` +\S+ +\S+ +([0-9.]+× \[[0-9.]+–[0-9.]+\]|-) *$`), out, metric)
	}
	require.Contains(t, errs, "round 2 of 2")
	require.Equal(t, 4, strings.Count(errs, "load: round "), "two runs a round")
}
