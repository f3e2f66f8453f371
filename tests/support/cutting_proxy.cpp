#include "cutting_proxy.hpp"
