package motoserver

import (
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sts"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestServerAnswers: the shared server answers an AWS API call with moto's
// default account.
func TestServerAnswers(t *testing.T) {
	out, err := sts.NewFromConfig(Config(t)).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *out.Account; got != "123456789012" {
		t.Errorf("account %q, want moto's 123456789012", got)
	}
}
