package main

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddblocal"
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

// TestLoadFreshLocal: with --fresh-local each run has a DynamoDB
// Local of its own, started for it instead of the --endpoint-url given and
// stopped after it, and the report still compares the two programs.
func TestLoadFreshLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs and starts two DynamoDB Locals")
	}
	if os.Getenv(ddblocal.EnvEndpoint) != "" {
		t.Skipf("$%s names a shared DynamoDB Local, which --fresh-local refuses", ddblocal.EnvEndpoint)
	}
	e := newEnv(t)
	code, out, errs := e.cli("load", "--contender", "HEAD", "--fresh-local", "--rounds", "1", "--entities", "2", "--rpm", "1", "-d", "1s", "-c", "2")
	require.Equal(t, exitOK, code, "stderr %s", errs)
	t.Log("\n" + out)
	require.Regexp(t, regexp.MustCompile(`(?m)^ *acquires/s +\S+ +\S+ +[0-9.]+× \[[0-9.]+–[0-9.]+\] *$`), out)
	runs := regexp.MustCompile(`load: round 1 of 1: .* of a fresh DynamoDB Local \((\S+)\) at (\S+)\n`).FindAllStringSubmatch(errs, -1)
	require.Len(t, runs, 2, "a DynamoDB Local for each run: %s", errs)
	// The CPU of a DynamoDB Local run from the jar is read from /proc: per
	// acquire and per call, in milliseconds, for both programs.
	cpuRows := 0
	for _, metric := range []string{"DynamoDB Local CPU per acquire", "DynamoDB Local CPU per call"} {
		m := regexp.MustCompile(`(?m)^ *` + regexp.QuoteMeta(metric) + ` +([0-9.]+)ms +([0-9.]+)ms +[0-9.]+× \[[0-9.]+–[0-9.]+\] *$`).FindStringSubmatch(out)
		if m == nil {
			continue
		}
		cpuRows++
		for _, v := range m[1:] {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			require.Positive(t, f, "%s: %s", metric, m[0])
		}
	}
	wantRows := 0
	if runtime.GOOS == "linux" && runs[0][1] == string(ddblocal.SourceJava) && runs[1][1] == string(ddblocal.SourceJava) {
		wantRows = 2
	}
	require.Equal(t, wantRows, cpuRows, "DynamoDB Local's CPU rows (runs on %s and %s)", runs[0][1], runs[1][1])
	hc := &http.Client{Timeout: 2 * time.Second}
	for _, run := range runs {
		require.NotEqual(t, e.endpoint, run[2], "not the --endpoint-url given")
		resp, err := hc.Get(run[2])
		if err == nil {
			resp.Body.Close()
		}
		require.Error(t, err, "%s still answers after its run", run[2])
	}
}

// TestLoadFreshLocalNeedsContender: --fresh-local alone is refused before
// anything runs, not ignored.
func TestLoadFreshLocalNeedsContender(t *testing.T) {
	e := newEnv(t)
	code, _, errs := e.cli("load", "--fresh-local", "--entities", "2", "-d", "1s", "-c", "1")
	require.NotEqual(t, exitOK, code)
	require.Contains(t, errs, "--fresh-local starts a DynamoDB Local for each run of --contender")
}
