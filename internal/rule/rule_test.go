package rule

import (
	"testing"
	"time"
)

func TestErrorShowsFieldsAsAskedAndOtherArgsAsTheyAre(t *testing.T) {
	renew := Field{Name: "RenewDeadline", Label: "renewDeadline", Value: 2 * time.Second}
	key := Field{Name: "Key", Value: "a b"}
	pod := Field{Name: "PodName", Label: "podName", Value: "P"}
	e := Errorf("c", "%s, %s and %s: %d %s", renew, key, pod, 3, "{Key}")
	if got, want := e.Error(), `c: renewDeadline (2s), "a b" and podName "P": 3 {Key}`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if len(e.Fields) != 3 || e.Fields[0] != renew || e.Fields[2] != pod {
		t.Errorf("Fields = %+v", e.Fields)
	}
	got := e.Text(func(f Field) string { return "V_" + f.Name + "=" + ShowValue(f.Value) })
	if want := `V_RenewDeadline=2s, V_Key="a b" and V_PodName="P": 3 {Key}`; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
}
