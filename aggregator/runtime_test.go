package aggregator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/skiplog"
	"github.com/zaelimiter/limiter/store"
)

// The Lambda Runtime Interface Emulator, AWS's implementation of the Lambda
// runtime API and invoke endpoint that the provided.al2023 images run.
const (
	rieVersion = "v0.0.0-20261030222936-bef5c4ba774d"
	riePackage = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"
)

// unavailableTool skips the test, recorded as skipped for want of the
// emulator, or fails it under CI, where every tool must be there.
func unavailableTool(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	skiplog.Skip(t, "aws-lambda-rie", fmt.Sprintf(format, args...))
}

// rieBinary returns the emulator: $ZAEL_LAMBDA_RIE, aws-lambda-rie on the
// PATH, or the pinned version built with `go install` into the user's
// cache directory (once).
func rieBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ZAEL_LAMBDA_RIE"); p != "" {
		return p
	}
	if p, err := exec.LookPath("aws-lambda-rie"); err == nil {
		return p
	}
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	dir := filepath.Join(cache, "zae-limiter", "aws-lambda-rie-"+rieVersion)
	bin := filepath.Join(dir, "aws-lambda-rie")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command("go", "install", riePackage+"@"+rieVersion)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		unavailableTool(t, "go install %s@%s: %v\n%s", riePackage, rieVersion, err, out)
	}
	return bin
}

// startLambdaRuntime builds cmd/aggregator as the Lambda's bootstrap (for
// this machine, with the lambda.norpc tag of `make lambda`), runs it under
// the emulator with the aggregator's environment for table on the
// package's DynamoDB Local, and returns the function's invoke URL. The
// emulator and the function are killed when the test ends.
func startLambdaRuntime(t *testing.T, table, windows string) string {
	t.Helper()
	endpoint := ddblocal.Endpoint(t)
	rie := rieBinary(t)
	dir := t.TempDir()
	bootstrap := filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bootstrap, "./cmd/aggregator")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the bootstrap\n%s", out)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", addr, bootstrap)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env,
		EnvTableName+"="+table, EnvSnapshotWindows+"="+windows,
		"AWS_ENDPOINT_URL_DYNAMODB="+endpoint, "AWS_REGION="+ddblocal.Region,
		"AWS_ACCESS_KEY_ID="+ddblocal.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+ddblocal.SecretAccessKey,
	)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	// Its own process group, so that the function the emulator starts is
	// killed with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start(), "start %s", rie)
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("emulator and function output:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		require.False(t, time.Now().After(deadline), "the emulator does not listen on %s", addr)
		time.Sleep(50 * time.Millisecond)
	}
	return "http://" + addr + "/2015-03-31/functions/function/invocations"
}

// invokeRuntime sends recs as one DynamoDB stream event to the function at
// url and fails the test on an error or reported failures.
func invokeRuntime(t *testing.T, url string, recs []events.DynamoDBEventRecord) {
	t.Helper()
	payload, err := json.Marshal(events.DynamoDBEvent{Records: recs})
	require.NoError(t, err)
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Post(url, "application/json", bytes.NewReader(payload))
	require.NoError(t, err, "invoke")
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "invoke: %s", body)
	var out events.DynamoDBEventResponse
	require.NoError(t, json.Unmarshal(body, &out), "response %s", body)
	require.Empty(t, out.BatchItemFailures, "BatchItemFailures in %s", body)
}

// pythonRecords returns the stream records of one request of 1 rpm and
// 100 tpm at each instant of at on bucket C/gpt of namespace ns, written by
// the Python library: MODIFY records of its item layout
// (testdata/modify_bucket.json, which has none of the attributes this
// library adds), each raising the net counters b_rpm_tc and b_tpm_tc by
// one request.
func pythonRecords(t *testing.T, ns string, at []time.Time) []events.DynamoDBEventRecord {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "modify_bucket.json"))
	require.NoError(t, err)
	raw = bytes.ReplaceAll(raw, []byte(fixtureNS), []byte(ns))
	recs := make([]events.DynamoDBEventRecord, 0, len(at))
	for i, when := range at {
		var ev events.DynamoDBEvent
		require.NoError(t, json.Unmarshal(raw, &ev))
		require.Len(t, ev.Records, 1)
		r := ev.Records[0]
		for name, per := range map[string]int64{"b_rpm_tc": 1000, "b_tpm_tc": 100_000} {
			const base = 1_000_000
			r.Change.OldImage[name] = events.NewNumberAttribute(strconv.FormatInt(base+int64(i)*per, 10))
			r.Change.NewImage[name] = events.NewNumberAttribute(strconv.FormatInt(base+int64(i+1)*per, 10))
		}
		r.EventID = fmt.Sprintf("py-%d", i)
		r.Change.SequenceNumber = fmt.Sprintf("%021d", 1000+i)
		r.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: when}
		recs = append(recs, r)
	}
	return recs
}

// TestLambdaRuntimeMidnightWindows: the aggregator's Lambda binary, run by
// the Lambda Runtime Interface Emulator, reports the hourly, daily and
// monthly windows apart, each equal to the committed consumption, given
// the stream records of four requests at 00:30 UTC on the 1st (and one a
// millisecond before midnight) written by the limiter, and written by the
// Python library (its item layout).
func TestLambdaRuntimeMidnightWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the Lambda and runs it under the emulator")
	}
	e := newEnv(t, func(o *Options) { o.Windows = allWindows })
	url := startLambdaRuntime(t, e.proc.Table(), strings.Join(allWindows, ","))
	invoke := func(t *testing.T, recs []events.DynamoDBEventRecord) { invokeRuntime(t, url, recs) }
	at := time.Date(2026, 12, 1, 0, 30, 0, 0, time.UTC)
	instants := []time.Time{time.Date(2026, 11, 30, 23, 59, 59, 999_000_000, time.UTC),
		at, at.Add(time.Second), at.Add(2 * time.Second), at.Add(3 * time.Second)}
	midnight := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	check := func(t *testing.T, model, got windowModel) {
		t.Helper()
		require.Equal(t, model, got, "snapshots by window type and start")
		for _, w := range allWindows {
			require.Equal(t, windowUsage{Counters: map[string]int64{"rpm": 4, "tpm": 400}, Events: 8}, got[w][midnight],
				"%s window at %v", w, midnight)
		}
		require.Equal(t, windowUsage{Counters: map[string]int64{"rpm": 1, "tpm": 100}, Events: 2},
			got[store.WindowHourly][time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)], "the hour before midnight")
	}
	t.Run("limiter", func(t *testing.T) {
		model := runWindowed(t, e, allWindows, "k", instants, limiter.Consume{"rpm": 1, "tpm": 100}, invoke)
		check(t, model, snapshotModel(t, e.limiter(false), "k"))
	})
	t.Run("Python library", func(t *testing.T) {
		model := windowModel{}
		for _, when := range instants {
			model.add(allWindows, when, limiter.Consume{"rpm": 1, "tpm": 100})
		}
		invoke(t, pythonRecords(t, e.repo.NamespaceID(), instants))
		check(t, model, snapshotModel(t, e.limiter(false), "C"))
	})
}
