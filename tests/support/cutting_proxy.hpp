#pragma once
// (placeholder: the reply-cutting TCP proxy for the lost-reply tests)
