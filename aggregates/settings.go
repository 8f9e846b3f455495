package aggregates

import "github.com/iqdgateway/gateway/events"

// Settings are a site's operator-editable settings, declared here once:
// the operator API shows them (JSON names: docs/operator-api.md "Site
// settings") and changes them (through SiteSettings), the aggregate keeps
// them in Config. The events that carry them
// (events.SiteCreated, events.SiteUpdated) are separate, frozen structs,
// converted here and nowhere else, so that a change to these types can
// never change a stored event's shape.
type Settings struct {
	Name              string   `json:"name"`
	NegativeLimit     int64    `json:"negativeLimit"`
	IPAllowlist       []string `json:"ipAllowlist"`
	CallbackURL       string   `json:"callbackUrl"`
	HostedPage        bool     `json:"hostedPage"`
	DepositTTLSeconds int64    `json:"depositTtlSeconds"`
	RateLimit         int64    `json:"rateLimit"`
	// ReturnURL and SupportContact are shown on the hosted payment page
	// ("" for none); events.SitePageUpdated carries them.
	ReturnURL      string `json:"returnUrl"`
	SupportContact string `json:"supportContact"`
}

// SiteSettings is a change to Settings, as the operator API sends it: a
// nil field is left as it is. The JSON names are the operator API's
// (docs/operator-api.md "Site settings").
type SiteSettings struct {
	Name              *string   `json:"name"`
	NegativeLimit     *int64    `json:"negativeLimit"`
	IPAllowlist       *[]string `json:"ipAllowlist"`
	CallbackURL       *string   `json:"callbackUrl"`
	HostedPage        *bool     `json:"hostedPage"`
	DepositTTLSeconds *int64    `json:"depositTtlSeconds"`
	RateLimit         *int64    `json:"rateLimit"`
	ReturnURL         *string   `json:"returnUrl"`
	SupportContact    *string   `json:"supportContact"`
	// Sandbox is chosen when the site is created (site.sandbox), and
	// refused in an update.
	Sandbox *bool `json:"sandbox"`
}

// With returns st changed by the fields p sets.
func (st Settings) With(p SiteSettings) Settings {
	set(&st.Name, p.Name)
	set(&st.NegativeLimit, p.NegativeLimit)
	set(&st.IPAllowlist, p.IPAllowlist)
	set(&st.CallbackURL, p.CallbackURL)
	set(&st.HostedPage, p.HostedPage)
	set(&st.DepositTTLSeconds, p.DepositTTLSeconds)
	set(&st.RateLimit, p.RateLimit)
	set(&st.ReturnURL, p.ReturnURL)
	set(&st.SupportContact, p.SupportContact)
	return st
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// defaultSettings are a new site's settings before its creation's.
var defaultSettings = Settings{DepositTTLSeconds: DefaultDepositTTLSeconds}

// createdEvent is the site.created event of a site with settings st.
func createdEvent(id string, st Settings, c CreateSite) *events.SiteCreated {
	return &events.SiteCreated{SiteID: id, Name: st.Name, AppKey: c.AppKey, Secret: c.Secret, WebhookSecret: c.WebhookSecret,
		NegativeLimit: st.NegativeLimit, IPAllowlist: st.IPAllowlist, CallbackURL: st.CallbackURL, HostedPage: st.HostedPage,
		DepositTTLSeconds: st.DepositTTLSeconds, RateLimit: st.RateLimit,
		IdempotencyKey: c.IdempotencyKey, RequestHash: c.RequestHash}
}

// createdSettings are the settings a site.created event holds.
func createdSettings(p *events.SiteCreated) Settings {
	return Settings{Name: p.Name, NegativeLimit: p.NegativeLimit, IPAllowlist: p.IPAllowlist, CallbackURL: p.CallbackURL,
		HostedPage: p.HostedPage, DepositTTLSeconds: p.DepositTTLSeconds, RateLimit: p.RateLimit}
}

// pageChange reports whether p changes the hosted page's settings, which
// site.page_updated carries.
func pageChange(p SiteSettings) bool { return p.ReturnURL != nil || p.SupportContact != nil }

// coreChange reports whether p changes a setting site.updated carries.
func coreChange(p SiteSettings) bool {
	return p.Name != nil || p.NegativeLimit != nil || p.IPAllowlist != nil || p.CallbackURL != nil || p.HostedPage != nil ||
		p.DepositTTLSeconds != nil || p.RateLimit != nil
}

// pageEvent is the site.page_updated event of the change p.
func pageEvent(p SiteSettings) *events.SitePageUpdated {
	return &events.SitePageUpdated{ReturnURL: p.ReturnURL, Support: p.SupportContact}
}

// pageSettings is the change a site.page_updated event holds.
func pageSettings(p *events.SitePageUpdated) SiteSettings {
	return SiteSettings{ReturnURL: p.ReturnURL, SupportContact: p.Support}
}

// updatedEvent is the site.updated event of the change p.
func updatedEvent(p SiteSettings) *events.SiteUpdated {
	return &events.SiteUpdated{Name: p.Name, NegativeLimit: p.NegativeLimit, IPAllowlist: p.IPAllowlist,
		CallbackURL: p.CallbackURL, HostedPage: p.HostedPage, DepositTTLSeconds: p.DepositTTLSeconds, RateLimit: p.RateLimit}
}

// updatedSettings is the change a site.updated event holds.
func updatedSettings(p *events.SiteUpdated) SiteSettings {
	return SiteSettings{Name: p.Name, NegativeLimit: p.NegativeLimit, IPAllowlist: p.IPAllowlist,
		CallbackURL: p.CallbackURL, HostedPage: p.HostedPage, DepositTTLSeconds: p.DepositTTLSeconds, RateLimit: p.RateLimit}
}
