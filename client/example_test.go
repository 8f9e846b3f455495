package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/iqdgateway/gateway/client"
)

// The sign header of a GET is the HMAC of its query.
func ExampleSign() {
	fmt.Println(client.Sign("demo-secret", []byte("processId=order-1001")))
	// Output: KN/O3ldlAet0madn3cJXBj2KAW2W5CIelENAAvIYpJM=
}

// Create a deposit and show the end user where to pay; a repeat of the
// call with the same processId returns the same deposit.
func ExampleClient_CreateDeposit() {
	c := client.New("http://127.0.0.1:8080", "ak_demo", "demo-secret")
	d, err := c.CreateDeposit(context.Background(), client.DepositRequest{BankID: "ZAINCASH", ProcessID: "order-1001",
		Amount: 25000, UserID: "u-42", UserName: "ali_k", Name: "Ali Kareem"})
	var unknown *client.NetworkError
	switch {
	case err == nil:
	case client.Code(err) == "unknown_bank", client.Code(err) == "amount_out_of_range":
		log.Printf("ask the user for another method: %v", err)
		return
	case errors.As(err, &unknown), client.Code(err) == "outcome_unknown", client.Code(err) == "unavailable":
		// Every try failed on the way, came back unreadable (a proxy's
		// error page) or found the gateway unavailable: the deposit may
		// exist or not. The same call later, with the same processId,
		// returns it or creates it, once.
		log.Printf("repeat order-1001 later: %v", err)
		return
	default:
		log.Fatal(err)
	}
	if d.URL != nil {
		fmt.Println("pay at", *d.URL)
	} else {
		fmt.Printf("send %d IQD to %s (%s)\n", d.Amount, d.BankAccountIban, d.BankAccountName)
	}
}

// A callback handler: verify, decode, deduplicate on the id.
func ExampleParseCallback() {
	const webhookSecret, secret = "whsec_…", "…"
	http.HandleFunc("/callbacks", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		cb, err := client.ParseCallback(webhookSecret, secret, r.Header, body, time.Now())
		if err != nil {
			http.Error(w, "bad callback", http.StatusBadRequest)
			return
		}
		log.Printf("%s: %s is %s (was %s), %d IQD", cb.ID, cb.Data.ProcessID, cb.Data.Status, cb.Data.PreviousStatus, cb.Data.Amount)
		w.WriteHeader(http.StatusNoContent)
	})
}
